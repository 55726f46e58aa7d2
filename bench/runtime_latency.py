"""The runtime's two latencies, on one ephemeral embedded Valkey, with ``echomq.runtime.consumer``:

- wake: an idle Consumer (beat 100 ms) and jobs enqueued one at a time, 20 ms apart:
  enqueue call -> handler start (HOST perf counter; includes the enqueue round trip);
- release: jobs scheduled ``enqueue_in`` at spread instants: handler start minus run-at,
  both on the SERVER clock (``TIME`` read in the handler; the run-at is the schedule score).
- ahead (``--ahead``): an idle Consumer at beat 100 ms and 1000 ms, on wire 4 (scripts)
  and wire 6 (native), and jobs scheduled one at a time ``enqueue_in`` 30..300 ms, each
  at a random phase of the beat, so most fall before the wake the loop already planned:
  start lateness (handler start minus run-at, SERVER clock as in release).

    .venv/bin/python bench/runtime_latency.py [--n 200] [--ahead [--ahead-n 30]]

Timings are noisy: the server, the consumer and this producer share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from echomq import AsyncConnector
from echomq.core import ids, keyspace
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.verbs import jobs


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


async def ahead(url: str, n: int, beat_ms: int, wire: int) -> list[float]:
    """Lateness (SERVER ms) of jobs scheduled 30..300 ms out under an idle ``beat_ms`` loop."""
    queue = f"ahead{beat_ms}w{wire}"
    conn = await AsyncConnector.connect(url, wire=wire)
    prod = await AsyncConnector.connect(url, wire=wire)
    due: dict[str, int] = {}
    got: list[float] = []
    started = asyncio.Event()

    async def handler(job: Job) -> None:
        got.append(await jobs.server_now_ms(prod) - due[job.id])
        started.set()

    rng = random.Random(beat_ms * 10 + wire)
    stop = asyncio.Event()
    task = asyncio.ensure_future(Consumer(conn, queue, handler, beat_ms=beat_ms).serve(stop, 5))
    await asyncio.sleep(0.3)
    for i in range(n):
        await asyncio.sleep(rng.random() * beat_ms / 1000)  # a random phase of the beat
        started.clear()
        jid = ids.mint()
        await jobs.enqueue_in(prod, queue, jid, b"x", 30 + (i * 270) // max(1, n - 1))
        due[jid] = int(await prod.call("ZSCORE", keyspace.queue_key(queue, "schedule"), jid))
        await asyncio.wait_for(started.wait(), 5 + 2 * beat_ms / 1000)
    stop.set()
    await task
    await conn.close()
    await prod.close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--ahead", action="store_true",
                    help="only the ahead mode: run-ats 30..300 ms out under beats 100/1000 ms")
    ap.add_argument("--ahead-n", type=int, default=30, help="jobs per beat and wire")
    args = ap.parse_args()
    with EmbeddedServer(ephemeral=True) as srv:
        if args.ahead:
            print(f"start lateness of jobs scheduled 30..300 ms out (SERVER ms, "
                  f"n={args.ahead_n} per row)")
            for beat_ms in (100, 1000):
                for wire in (4, 6):
                    xs = asyncio.run(ahead(srv.url, args.ahead_n, beat_ms, wire))
                    print(summary(f"beat {beat_ms:>4} ms wire {wire}", xs))
            return
        print(summary("wake", asyncio.run(wake(srv.url, args.n))))
        print(summary("release", asyncio.run(release(srv.url, args.n))))


if __name__ == "__main__":
    main()
