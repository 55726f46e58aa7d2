"""Result round trip at light load: ``task.enqueue(...)`` -> ``app.result(id)`` in hand.

One ephemeral embedded Valkey; a Worker (concurrency 10, beat 100 ms, the defaults a user
gets) serves an App in a background thread; this thread enqueues one job of a task with
``keep_result`` and blocks in ``app.result`` until the value is back, one job at a time,
``--gap`` ms apart. The time is HOST ``perf_counter`` from before the enqueue to the value
in hand: it includes the enqueue round trip, the worker's wake, the handler, the ack that
stores the value and pushes the end token, and the waiter's wake and read. Also measured:
the same round trip for an ``async`` handler, and the plain enqueue -> handler start
latency the rest builds on.

    .venv/bin/python bench/result_roundtrip.py [--n 300] [--gap 10] [--wire 4]

Timings are noisy: the server, the worker and this producer share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from typing import Any

from echomq import native
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.app import App
from echomq.tasks.worker import Worker


def pick(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def serve(app: App, queues: list[str]) -> tuple[threading.Thread, Any]:
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    worker = Worker(app, queues, concurrency=10, beat_ms=100, grace_s=5)

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(worker.run(stop))
        loop.close()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    while not worker.consumers:
        time.sleep(0.01)
    time.sleep(0.3)
    return thread, lambda: loop.call_soon_threadsafe(stop.set)


def measure(app: App, task: Any, n: int, gap_s: float) -> list[float]:
    out: list[float] = []
    for i in range(n):
        t0 = time.perf_counter()
        job_id = task.enqueue(i)
        value = app.result(job_id, timeout=10)
        out.append((time.perf_counter() - t0) * 1000)
        assert value == i + 1, value
        time.sleep(gap_s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--gap", type=float, default=10.0, help="ms between jobs (light load)")
    ap.add_argument("--wire", type=int, default=4, choices=(4, 6))
    args = ap.parse_args()
    if args.wire == 6 and not native.available():
        raise SystemExit("wire 6 needs the built native module")
    srv = EmbeddedServer(ephemeral=True).start()
    app = App(srv.url, wire=args.wire)
    started: dict[int, float] = {}

    @app.task(queue="rt", name="inc", keep_result=60)
    def inc(x: int) -> int:
        return x + 1

    @app.task(queue="rt-async", name="ainc", keep_result=60)
    async def ainc(x: int) -> int:
        return x + 1

    @app.task(queue="rt-start", name="mark")
    def mark(i: int) -> None:
        started[i] = time.perf_counter()

    thread, stop = serve(app, ["rt", "rt-async", "rt-start"])
    try:
        measure(app, inc, 20, 0)  # warm-up: scripts loaded, pools filled
        rows = [("result, sync handler", measure(app, inc, args.n, args.gap / 1000)),
                ("result, async handler", measure(app, ainc, args.n, args.gap / 1000))]
        starts: list[float] = []
        for i in range(args.n):
            t0 = time.perf_counter()
            mark.enqueue(i)
            while i not in started:
                time.sleep(0.0002)
            starts.append((started[i] - t0) * 1000)
            time.sleep(args.gap / 1000)
        rows.append(("enqueue -> handler start", starts))
    finally:
        stop()
        thread.join(10)
        app.close()
        srv.stop()
    print(f"result round trip at light load (n={args.n}, {args.gap:g} ms apart, wire "
          f"{args.wire}, one job in flight)\n")
    print(f"| {'measure':<26} | {'p50 ms':>7} | {'p90 ms':>7} | {'p99 ms':>7} | {'max ms':>7} |")
    print(f"|{'-' * 28}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, xs in rows:
        print(f"| {name:<26} | {pick(xs, .5):7.2f} | {pick(xs, .9):7.2f} | {pick(xs, .99):7.2f} "
              f"| {max(xs):7.2f} |")


if __name__ == "__main__":
    main()
