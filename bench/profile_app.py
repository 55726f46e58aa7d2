"""Where the App's worker spends its Python per job, beside the runtime's ``Consumer``.

Loads N no-op jobs on a fresh embedded Valkey (with the EMQ module when it is built), then
drains them in this process under ``cProfile``: once with a bare ``Consumer`` and once with
``Worker(app, [q], concurrency=C)`` of an ``App`` with one async no-op ``@app.task`` (its
defaults: presence, task metrics, the Metronome). Prints each drain's CPU time per job
(``time.process_time`` of this process, profiler on: read them as a ratio) and the top
functions by own CPU time, so the difference between the two is the App's share.

    .venv/bin/python bench/profile_app.py [--n 20000] [--concurrency 50] [--top 25]
        [--wire 6|4] [--only app|consumer] [--sort tottime|cumtime] [--save PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import time
from typing import Any

from echomq import App, AsyncConnector, native
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.tasks.worker import Worker
from echomq.verbs import jobs

QUEUE = "bench"
PAYLOAD = b'{"task":"noop","args":[]}'


async def load(url: str, n: int, wire: int) -> None:
    conn = await AsyncConnector.connect(url, wire=wire)
    for i in range(0, n, 1000):
        await jobs.enqueue_many(conn, QUEUE, [(ids.mint(), PAYLOAD)
                                              for _ in range(min(1000, n - i))])
    await conn.close()


async def drain_consumer(url: str, n: int, wire: int, concurrency: int) -> float:
    conn = await AsyncConnector.connect(url, wire=wire)
    stop = asyncio.Event()
    seen = [0, 0.0]

    async def on_job(job: Any) -> None:
        seen[0] += 1
        if seen[0] == 1:
            seen[1] = time.process_time()
        if seen[0] >= n:
            stop.set()

    await Consumer(conn, QUEUE, on_job, concurrency=concurrency).run(stop)
    await conn.close()
    return time.process_time() - seen[1]


async def drain_app(url: str, n: int, wire: int, concurrency: int) -> float:
    app = App(url, wire=wire, default_queue=QUEUE)
    stop = asyncio.Event()
    seen = [0, 0.0]

    @app.task(name="noop")
    async def noop() -> None:
        seen[0] += 1
        if seen[0] == 1:
            seen[1] = time.process_time()
        if seen[0] >= n:
            stop.set()

    await Worker(app, [QUEUE], concurrency=concurrency, grace_s=5).run(stop)
    return time.process_time() - seen[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--wire", type=int, choices=(4, 6), default=6 if native.available() else 4)
    ap.add_argument("--only", choices=("app", "consumer"))
    ap.add_argument("--sort", choices=("tottime", "cumtime"), default="tottime")
    ap.add_argument("--save", help="also write each profile to SAVE.<name>.prof (pstats)")
    args = ap.parse_args()
    for name, drain in (("consumer", drain_consumer), ("app", drain_app)):
        if args.only and name != args.only:
            continue
        srv = EmbeddedServer(ephemeral=True, native=args.wire == 6)
        srv.start()
        try:
            asyncio.run(load(srv.url, args.n, args.wire))
            prof = cProfile.Profile(time.process_time)  # CPU time: a busy box's waits left out
            prof.enable()
            seconds = asyncio.run(drain(srv.url, args.n, args.wire, args.concurrency))
            prof.disable()
        finally:
            srv.stop()
        if args.save:
            prof.dump_stats(f"{args.save}.{name}.prof")
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats(args.sort).print_stats(args.top)
        print(f"== {name} (wire {args.wire}): {seconds / args.n * 1e6:.1f} µs per job "
              f"under the profiler, N = {args.n:,}")
        print("\n".join(out.getvalue().splitlines()[6:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
