"""EchoMQ's side of the bench, on the core verbs (``echomq.jobs``) and ``AsyncConnector``.

``--variant`` picks the wire: ``4`` (scripts, EVALSHA) or ``6`` (the native module where a
verb has a twin). ``--variant consumer`` runs ``echomq.consumer.Consumer`` as the worker
when that module exists; otherwise the worker is the loop below, which does what the
runtime's beat does: recovery leg (reap) -> promote -> claim up to the concurrency ->
handlers -> one pipelined ack, and when nothing is claimable it blocks on the queue's wake
list for at most one beat, or until the earliest scheduled run-at if that comes sooner.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from _common import CHUNK, PAYLOAD, RECORD, SCHEDULE_AHEAD_S, chunks, parse, ready, report

from echomq import AsyncConnector, ids, jobs, keyspace

BEAT_S = 0.1  # the runtime's default beat (issue 3)
LEASE_MS = 30_000
PROMOTE_BATCH = 1000


def _wire(variant: str) -> int:
    return 6 if variant == "6" else 4


async def produce(args: Any) -> None:
    conn = await AsyncConnector.connect(args.url, wire=_wire(args.variant))
    q, n = args.queue, args.n
    ahead_ms = SCHEDULE_AHEAD_S * 1000
    mint = ids.mint
    t0 = time.perf_counter()
    if args.scenario == "enqueue-one":
        for _ in range(n):
            await jobs.enqueue(conn, q, mint(), PAYLOAD)
    elif args.scenario == "schedule-one":
        for _ in range(n):
            await jobs.enqueue_in(conn, q, mint(), PAYLOAD, ahead_ms)
    elif args.scenario in ("enqueue-bulk", "load-now"):
        for part in chunks(n, CHUNK):
            await jobs.enqueue_many(conn, q, [(mint(), PAYLOAD) for _ in part])
    elif args.scenario == "schedule-bulk":
        for part in chunks(n, CHUNK):
            await jobs.schedule_many(conn, q, [(mint(), PAYLOAD, "in", ahead_ms) for _ in part])
    elif args.scenario == "load-at":
        due_ms = round(args.due * 1000)
        for part in chunks(n, CHUNK):
            await jobs.schedule_many(conn, q, [(mint(), PAYLOAD, "at", due_ms) for _ in part])
    elapsed = time.perf_counter() - t0
    await conn.close()
    report(seconds=elapsed, n=n)


def handler(payload: bytes) -> None:
    RECORD()


async def work(args: Any) -> None:
    RECORD.arm(args.n, args.out)
    if args.variant == "consumer":
        await work_consumer(args)
        return
    conn = await AsyncConnector.connect(args.url, wire=_wire(args.variant))
    q, k = args.queue, args.concurrency
    wake = keyspace.queue_key(q, "wake")
    schedule = keyspace.queue_key(q, "schedule")
    client = conn.client
    ready()
    next_beat = 0.0
    while True:
        now = time.monotonic()
        if now >= next_beat:
            # the recovery leg and the promote run once per beat, and whenever the wait
            # below ended because a run-at came due
            next_beat = now + BEAT_S
            await jobs.reap(conn, q, PROMOTE_BATCH)
            await jobs.promote(conn, q, PROMOTE_BATCH)
        claims = await jobs.claim_many(conn, q, LEASE_MS, k)
        if claims:
            for c in claims:
                handler(c.payload)
            await jobs.ack_many(conn, q, [(c.id, c.token) for c in claims], keep=False)
            continue
        wait = max(0.0, next_beat - time.monotonic())
        head = await client.zrange(schedule, 0, 0, withscores=True)
        if head:
            wait = min(wait, max(0.0, head[0][1] / 1000.0 - time.time()))
        if wait > 0:
            got = await client.blpop([wake], timeout=wait)
            if got is None:
                next_beat = 0.0  # woken by time: a run-at or the beat is due
        else:
            next_beat = 0.0


async def work_consumer(args: Any) -> None:  # pragma: no cover - depends on the runtime
    from echomq import consumer as consumer_mod

    Consumer: Any = consumer_mod.Consumer
    conn = await AsyncConnector.connect(args.url, wire=4)

    async def on_job(*_: Any) -> None:
        RECORD()

    cons = Consumer(conn, args.queue, on_job, concurrency=args.concurrency)
    ready()
    await cons.run()


def main() -> None:
    args = parse()
    asyncio.run(produce(args) if args.role == "produce" else work(args))


if __name__ == "__main__":
    main()
