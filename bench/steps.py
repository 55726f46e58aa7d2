"""Durable steps, measured (issue 35): what a step costs, how fast a signal resumes its job,
and how late a sleep (and a wait's timeout) wakes.

- step cost: ``--n`` steps recorded on one job in hand (``durable.record``: one fenced
  script each) against the same work as ``--n`` separate jobs chained one after another
  (each admitted, claimed and acked: three transitions). Client µs per step (HOST
  monotonic, round trip included) and server µs per step (``INFO commandstats``, the
  scripts' own time).
- signal → resumed: a Worker with free slots runs a handler parked in ``wait_for``; the ms
  from ``app.signal`` to the re-run's ``wait_for`` returning (HOST monotonic, one process).
- wake lateness: a handler sleeps ``--sleep-ms`` (or waits with that timeout); the ms from
  the wake (the step's SERVER-ms ``until``) to the re-run passing the step (SERVER clock),
  under a Worker at a 1 s beat: the wake must not wait for a beat.

    python bench/steps.py --n 2000 --trials 20

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from echomq import App, Connector, current_job, errors, ids
from echomq.tasks.worker import Worker
from echomq.verbs import durable, jobs


def _server_usec(conn: Connector) -> float:
    """Total µs the server spent in scripts and the native commands so far."""
    stats = conn.call("INFO", "commandstats")  # parsed by the client: {cmdstat_x: {...}}
    return sum(float(v["usec"]) for k, v in stats.items()
               if k in ("cmdstat_evalsha", "cmdstat_eval") or k.startswith("cmdstat_emq."))


def step_cost(conn: Connector, n: int) -> dict[str, tuple[float, float]]:
    """(client µs, server µs) per step: recorded steps vs chained jobs."""
    queue = f"bench-steps-{ids.mint()}"
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    claim = jobs.claim(conn, queue, 600_000)
    assert claim is not None
    usec, t = _server_usec(conn), time.perf_counter()
    for i in range(n):
        durable.record(conn, queue, jid, claim.token, f"s{i}", b'{"ok":1}')
    steps = ((time.perf_counter() - t) * 1e6 / n, (_server_usec(conn) - usec) / n)
    chain_q = f"bench-chain-{ids.mint()}"
    usec, t = _server_usec(conn), time.perf_counter()
    for _ in range(n):  # each link: admitted, claimed, acked, as a chain's next job is
        jobs.enqueue(conn, chain_q, ids.mint(), b'{"ok":1}')
        got = jobs.claim(conn, chain_q, 600_000)
        assert got is not None
        jobs.ack(conn, chain_q, got.id, got.token)
    chained = ((time.perf_counter() - t) * 1e6 / n, (_server_usec(conn) - usec) / n)
    return {"step (record)": steps, "chained job": chained}


@contextmanager
def running(app: App, queue: str, beat_ms: int) -> Iterator[None]:
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    worker = Worker(app, [queue], beat_ms=beat_ms, concurrency=4)
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.run(stop),))
    thread.start()
    time.sleep(0.3)  # the worker's first beat planned its next
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def _until(pred: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := pred()):
        if time.monotonic() > deadline:
            raise TimeoutError("the bench's job never got there")
        time.sleep(0.001)
    return got


def signal_latency(url: str, trials: int) -> list[float]:
    """ms from app.signal to the handler's wait_for returning on its re-run."""
    app = App(url)
    queue = f"bench-signal-{ids.mint()}"
    resumed: dict[str, float] = {}

    @app.task(queue=queue, name="waits")
    async def waits(key: str) -> None:
        await current_job().wait_for(key, timeout=60)
        resumed[key] = time.monotonic()

    out = []
    with running(app, queue, beat_ms=1_000):
        for t in range(trials):
            key = f"bench:{queue}:{t}"
            jid = waits.enqueue(key)
            _until(lambda jid=jid: (jobs.get(app.connector(), queue, jid) or {}).get(
                "state") == "waiting")
            sent = time.monotonic()
            app.signal(key, t)
            _until(lambda key=key: key in resumed)
            out.append((resumed[key] - sent) * 1000)
    app.close()
    return out


def wake_lateness(url: str, trials: int, ms: int, kind: str) -> list[int]:
    """ms from each sleep's wake (or wait's timeout) to its re-run passing it, SERVER
    clock, a Worker at a 1 s beat."""
    app = App(url)
    conn = app.connector()
    queue = f"bench-{kind}-{ids.mint()}"
    late: dict[str, int] = {}

    @app.task(queue=queue, name="naps")
    def naps() -> None:
        job = current_job()
        if kind == "sleep":
            job.sleep("nap", ms)
        else:
            with suppress(errors.SignalTimeout):
                job.wait_for(f"never:{job.id}", timeout=ms / 1000, name="nap")
        now = jobs.server_now_ms(conn)
        step = next(s for s in durable.steps(conn, queue, job.id) if s.name == "nap")
        wake = step.until_ms if step.until_ms is not None else step.at_ms
        late[job.id] = now - (wake or now)

    with running(app, queue, beat_ms=1_000):
        for _ in range(trials):
            jid = naps.enqueue()
            _until(lambda jid=jid: jid in late)
            time.sleep(0.05 + (hash(jid) % 300) / 1000)  # land anywhere in the beat
    app.close()
    return list(late.values())


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2_000, help="steps (and chained jobs)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--sleep-ms", type=int, default=150)
    args = parser.parse_args()
    url = os.environ.get("ECHOMQ_URL")
    server: Any = None
    if not url:
        from echomq.embedded.server import EmbeddedServer

        server = EmbeddedServer(ephemeral=True)
        server.start()
        url = server.url
    conn = Connector.connect(url)
    print(f"{'step cost (n=' + str(args.n) + ')':<28} {'client µs':>10} {'server µs':>10}")
    for name, (client_us, server_us) in step_cost(conn, args.n).items():
        print(f"  {name:<26} {client_us:>10.1f} {server_us:>10.1f}")
    conn.close()
    sig = signal_latency(url, args.trials)
    print(f"signal → resumed (ms, n={len(sig)}): p50 {statistics.median(sig):.2f}  "
          f"p90 {_pct(sig, 0.9):.2f}  max {max(sig):.2f}")
    for kind in ("sleep", "wait-timeout"):
        late = wake_lateness(url, args.trials, args.sleep_ms, kind)
        print(f"{kind} wake lateness at a 1 s beat (ms, n={len(late)}): "
              f"p50 {statistics.median(late):.0f}  p90 {_pct(late, 0.9):.0f}  "
              f"max {max(late)}")
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()
