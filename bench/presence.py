"""The live worker registry's cost on drain throughput: a Worker drains N jobs with its
presence on (registered, heartbeating, publishing what it runs whenever that changes) and
off, alternating on/off/off/on/... so drift and load hit both alike; medians and the ratio.

    python bench/presence.py                 # N = 20,000, 5 rounds each way
    python bench/presence.py --n 5000 --rounds 3

One ephemeral embedded Valkey for the run, a fresh queue per drain. The worker runs in
this process on its own event loop (an ``async def`` task that sleeps 1 ms, concurrency
50, beat 100 ms, heartbeat 5 s: the busy list changes on every publish tick, the
registry's worst case); the producer fills the queue with ``enqueue_many`` before
the worker starts. The rate is N over the time from the first job's start to the last
one's settled ack (HOST monotonic). Also printed: the heartbeats the registry sent per
drain (its whole cost in round trips).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from echomq import App, AsyncConnector
from echomq.core import ids
from echomq.core.payload import encode
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.worker import Worker
from echomq.verbs import jobs


async def fill(url: str, queue: str, n: int) -> None:
    conn = await AsyncConnector.connect(url)
    body = encode("noop", [1])
    for i in range(0, n, 1000):
        await jobs.enqueue_many(conn, queue, [(ids.mint(), body)
                                              for _ in range(min(1000, n - i))])
    await conn.close()


def drain(url: str, n: int, presence: bool, concurrency: int) -> tuple[float, int]:
    """One drain: (jobs per second, heartbeats sent)."""
    queue = "bench" + uuid.uuid4().hex[:8]
    app = App(url)
    first: list[float] = []

    @app.task(queue=queue, name="noop")
    async def noop(_: int) -> None:
        if not first:
            first.append(time.monotonic())
        # a millisecond in hand: the busy list always has jobs and changes on every
        # publish tick (the registry's worst case); a handler that returns without
        # awaiting is never seen running, and the registry would publish nothing
        await asyncio.sleep(0.001)

    async def main() -> tuple[float, int]:
        await fill(url, queue, n)
        worker = Worker(app, [queue], concurrency=concurrency, presence=presence,
                        log_jobs=False)
        stop = asyncio.Event()
        running = asyncio.ensure_future(worker.run(stop))
        while not worker.consumers or sum(c.stats.completed for c in worker.consumers) < n:
            await asyncio.sleep(0.002)
        last = time.monotonic()
        beats = worker.presence.beats if worker.presence is not None else 0
        stop.set()
        await running
        return n / (last - first[0]), beats

    try:
        return asyncio.run(main())
    finally:
        app.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=50)
    args = ap.parse_args()
    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    seen: dict[bool, list[float]] = {True: [], False: []}
    beats: list[int] = []
    try:
        drain(srv.url, min(args.n, 2000), True, args.concurrency)  # warm up
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for on in order:
                rate, sent = drain(srv.url, args.n, on, args.concurrency)
                seen[on].append(rate)
                if on:
                    beats.append(sent)
                print(f"round {r + 1} presence {'on ' if on else 'off'}  {rate:9,.0f} jobs/s"
                      + (f"  ({sent} heartbeats)" if on else ""), flush=True)
    finally:
        srv.stop()
    on, off = statistics.median(seen[True]), statistics.median(seen[False])
    print()
    print(f"drain, N = {args.n:,}, concurrency {args.concurrency}, {args.rounds} rounds each")
    print("| presence | median jobs/s | runs |")
    print("|---|---:|---|")
    for label, key in (("off", False), ("on", True)):
        runs = ", ".join(f"{x:,.0f}" for x in seen[key])
        print(f"| {label} | {statistics.median(seen[key]):,.0f} | {runs} |")
    print(f"\non/off = {on / off:.3f}; heartbeats per drain (median) "
          f"{statistics.median(beats):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
