"""The runtime's two latencies, on one ephemeral embedded Valkey, with ``echomq.consumer``:

- wake: an idle Consumer (beat 100 ms) and jobs enqueued one at a time, 20 ms apart:
  enqueue call -> handler start (HOST perf counter; includes the enqueue round trip);
- release: jobs scheduled ``enqueue_in`` at spread instants: handler start minus run-at,
  both on the SERVER clock (``TIME`` read in the handler; the run-at is the schedule score).

    .venv/bin/python bench/runtime_latency.py [--n 200]

Timings are noisy: the server, the consumer and this producer share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from echomq import AsyncConnector, ids, jobs, keyspace
from echomq.consumer import Consumer, Job
from echomq.server import EmbeddedServer


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, int(len(xs) * q))]  # noqa: E731
    return (f"{name:<8} n={len(xs):<5} p50 {pick(0.5):7.2f} ms  p99 {pick(0.99):7.2f} ms  "
            f"max {xs[-1]:7.2f} ms")


async def wake(url: str, n: int) -> list[float]:
    conn, prod = await AsyncConnector.connect(url), await AsyncConnector.connect(url)
    sent: dict[str, float] = {}
    got: list[float] = []

    async def handler(job: Job) -> None:
        got.append((time.perf_counter() - sent[job.id]) * 1000)

    stop = asyncio.Event()
    task = asyncio.ensure_future(Consumer(conn, "wake", handler).serve(stop, 5))
    await asyncio.sleep(0.3)
    for _ in range(n):
        jid = ids.mint()
        sent[jid] = time.perf_counter()
        await jobs.enqueue(prod, "wake", jid, b"x")
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    stop.set()
    await task
    await conn.close()
    await prod.close()
    return got


async def release(url: str, n: int) -> list[float]:
    conn, prod = await AsyncConnector.connect(url), await AsyncConnector.connect(url)
    due: dict[str, int] = {}
    got: list[float] = []

    async def handler(job: Job) -> None:
        got.append(await jobs.server_now_ms(prod) - due[job.id])

    for i in range(n):
        jid = ids.mint()
        await jobs.enqueue_in(prod, "release", jid, b"x", 300 + (i * 2000) // n)
        due[jid] = int(await prod.call("ZSCORE", keyspace.queue_key("release", "schedule"),
                                       jid))
    stop = asyncio.Event()
    task = asyncio.ensure_future(Consumer(conn, "release", handler).serve(stop, 5))
    while len(got) < n:
        await asyncio.sleep(0.05)
    stop.set()
    await task
    await conn.close()
    await prod.close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    with EmbeddedServer(ephemeral=True) as srv:
        print(summary("wake", asyncio.run(wake(srv.url, args.n))))
        print(summary("release", asyncio.run(release(srv.url, args.n))))


if __name__ == "__main__":
    main()
