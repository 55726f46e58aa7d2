"""Time controls, measured: how late a pause with an end lets its job start (a Worker at a
1 s beat, SERVER clock, from the pause's end to the handler's start), and what a deadline and
a debounce key cost on the verbs (claims of jobs with and without a deadline; debounced
calls folding into one job).

    python bench/time_controls.py --trials 10 --n 10000

Prints one table. Runs against $ECHOMQ_URL, else an ephemeral embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from echomq import App, Connector, ids
from echomq.tasks.worker import Worker
from echomq.verbs import groups, jobs


def resume_lateness(url: str, what: str, trials: int) -> list[int]:
    """ms from each pause's end to its held job's start (SERVER clock), a Worker at 1 s."""
    out = [_one_pause(url, f"bench-pause-{what}-{os.getpid()}-{t}", what)
           for t in range(trials)]
    return [late for late in out if late is not None]


def _one_pause(url: str, queue: str, what: str) -> int | None:
    app = App(url)
    conn = app.connector()
    started: list[int] = []

    @app.task(queue=queue, name="held", group="g" if what == "group" else None)
    def held() -> None:
        started.append(jobs.server_now_ms(conn))

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    worker = Worker(app, [queue], beat_ms=1_000)
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.run(stop),))
    thread.start()
    time.sleep(0.5)  # the worker's first beat planned its next, a second out
    if what == "queue":
        jobs.pause(conn, queue)
    else:
        groups.pause(conn, queue, "g")
    held.enqueue()
    time.sleep(0.2)
    until = jobs.server_now_ms(conn) + 600
    if what == "queue":
        jobs.pause(conn, queue, until=until)
    else:
        groups.pause(conn, queue, "g", until=until)
    deadline = time.monotonic() + 5
    while not started and time.monotonic() < deadline:
        time.sleep(0.005)
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    app.close()
    return started[0] - until if started else None


def claim_rate(conn: Connector, n: int, deadline: bool) -> float:
    """Jobs per second claimed by claim_many(100) over n jobs, each with a deadline or not."""
    queue = f"bench-claim-{'dl' if deadline else 'plain'}-{ids.mint()}"
    for i in range(0, n, 500):
        items = [(ids.mint(), b"x") for _ in range(min(500, n - i))]
        if deadline:
            for jid, body in items:
                jobs.admit(conn, queue, jid, body, expires_ms=3_600_000)
        else:
            jobs.enqueue_many(conn, queue, items)
    began = time.perf_counter()
    got = 0
    while got < n:
        got += len(jobs.claim_many(conn, queue, 60_000, 100))
    return n / (time.perf_counter() - began)


def debounce_rate(conn: Connector, n: int) -> tuple[float, int]:
    """Debounced calls per second into one key, and how many jobs they made."""
    queue = f"bench-debounce-{os.getpid()}"
    began = time.perf_counter()
    made = {jobs.debounce(conn, queue, ids.mint(), b"x", "k", 60_000).id for _ in range(n)}
    return n / (time.perf_counter() - began), len(made)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--n", type=int, default=10_000)
    args = ap.parse_args()
    server: Any = None
    url = os.environ.get("ECHOMQ_URL")
    if not url:
        from echomq.embedded.server import EmbeddedServer

        server = EmbeddedServer(ephemeral=True)
        server.start()
        url = server.url
    try:
        rows = []
        for what in ("queue", "group"):
            late = resume_lateness(url, what, args.trials)
            rows.append((f"pause until: {what}, 1 s beat", "ms after the end",
                         f"median {statistics.median(late):.0f}, max {max(late)} "
                         f"({len(late)} of {args.trials})"))
        conn = Connector.connect(url)
        # alternated, three rounds each, medians: a loaded machine drifts
        plains, dls = [], []
        for _ in range(3):
            plains.append(claim_rate(conn, args.n, False))
            dls.append(claim_rate(conn, args.n, True))
        plain, dl = statistics.median(plains), statistics.median(dls)
        rows.append(("claim_many(100), plain jobs", "jobs/s", f"{plain:,.0f}"))
        rows.append(("claim_many(100), jobs with a deadline", "jobs/s",
                     f"{dl:,.0f} ({dl / plain:.2f}x)"))
        rate, made = debounce_rate(conn, args.n)
        rows.append(("debounce, one key", "calls/s", f"{rate:,.0f} ({made} job)"))
        conn.close()
    finally:
        if server is not None:
            server.stop()
    print("| measure | unit | value |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
