"""EchoMQ's side of the bench, on the core verbs (``echomq.verbs.jobs``) and ``AsyncConnector``.

``--variant``: ``4`` (scripts, EVALSHA) or ``6`` (the native module where a verb has a
twin); ``sync`` runs the per-job scenarios over the sync ``Connector`` (wire 4);
``pipelined`` runs the worker below with each batch's ack and the next claim in one
round trip (``jobs.ack_and_claim``); ``consumer`` runs the runtime's
``echomq.runtime.consumer.Consumer`` as the worker, ``consumer-6`` the same at wire 6 (the native
``EMQ.PROMOTE`` and the other native twins); ``app`` runs what users run, ``run_worker(app,
[q], concurrency=...)`` of an ``App`` with one async no-op ``@app.task`` (its defaults: presence,
task metrics, the Metronome) at wire 4, ``app-6`` the same on a server with the EMQ module (the
App picks wire 6 itself).

The worker below does what the runtime's beat does: recovery leg (reap) -> promote ->
claim up to the concurrency -> handlers -> one pipelined ack, and when nothing is
claimable it blocks on the queue's wake list for at most one beat, or until the earliest
scheduled run-at if that comes sooner.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import valkey.asyncio as avalkey
from _common import CHUNK, PAYLOAD, RECORD, SCHEDULE_AHEAD_S, TASK, chunks, parse, ready, report

from echomq import AsyncConnector, Connector
from echomq.core import ids, keyspace
from echomq.verbs import jobs

BEAT_S = 0.1  # the runtime's default beat
LEASE_MS = 30_000
PROMOTE_BATCH = 1000


def _wire(variant: str) -> int:
    return 6 if variant in ("6", "consumer-6", "app-6") else 4


def produce_sync(args: Any) -> None:
    """The per-job scenarios over the sync ``Connector`` (variant ``sync``)."""
    conn = Connector.connect(args.url, wire=4)
    q, n, mint = args.queue, args.n, ids.mint
    t0 = time.perf_counter()
    if args.scenario == "enqueue-one":
        for _ in range(n):
            jobs.enqueue(conn, q, mint(), PAYLOAD)
    elif args.scenario == "schedule-one":
        for _ in range(n):
            jobs.enqueue_in(conn, q, mint(), PAYLOAD, SCHEDULE_AHEAD_S * 1000)
    else:
        raise SystemExit(f"the sync variant runs the per-job scenarios only, not {args.scenario}")
    elapsed = time.perf_counter() - t0
    conn.close()
    report(seconds=elapsed, n=n)


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
    if args.variant in ("consumer", "consumer-6"):
        await work_consumer(args)
        return
    conn = await AsyncConnector.connect(args.url, wire=_wire(args.variant))
    q, k = args.queue, args.concurrency
    wake = keyspace.queue_key(q, "wake")
    schedule = keyspace.queue_key(q, "schedule")
    client = conn.client
    # BLPOP's own timeout fires on the server's cron (hz 10: up to 100 ms late), so the
    # wait is ended from here instead: a local timer sends CLIENT UNBLOCK to the blocked
    # connection at the beat or the earliest run-at, whichever is sooner. The BLPOP
    # timeout stays as a safety net one second later.
    blocker = avalkey.Valkey.from_url(args.url, single_connection_client=True)
    blocker_id = await blocker.client_id()
    loop = asyncio.get_running_loop()

    async def unblock() -> None:
        for _ in range(3):
            if await client.execute_command("CLIENT", "UNBLOCK", blocker_id):
                return
            await asyncio.sleep(0.001)  # not blocked yet: the BLPOP is still in flight

    claim_many, ack_many, promote = _verbs(conn, q, k)
    ready()
    next_beat = 0.0
    backlog = False  # the last promote filled its batch: more are due
    pipelined = args.variant == "pipelined"
    ack_and_claim = _ack_and_claim(conn, q, k)
    held: list[jobs.Claim] | None = None
    while True:
        now = time.monotonic()
        if now >= next_beat:
            # the recovery leg and the promote run once per beat, and whenever the wait
            # below ended because a run-at came due. The first promote after a wait is
            # one claim's worth, so the first due job starts without waiting for a
            # thousand rows to move; a full batch means a backlog, promoted in big bites.
            next_beat = now + BEAT_S
            await jobs.reap(conn, q, PROMOTE_BATCH)
            backlog = await promote(k) == k
        elif backlog:
            backlog = await promote(PROMOTE_BATCH) == PROMOTE_BATCH
        claims = held if held is not None else await claim_many()
        held = None
        if claims:
            for c in claims:
                handler(c.payload)
            if pipelined:  # this batch's ack and the next claim share one round trip
                held = await ack_and_claim(claims)
            else:
                await ack_many(claims)
            continue
        wait = max(0.0, next_beat - time.monotonic())
        head = await client.zrange(schedule, 0, 0, withscores=True)
        if head:
            wait = min(wait, max(0.0, head[0][1] / 1000.0 - time.time()))
        if wait > 0.002:
            timer = loop.call_later(wait, lambda: asyncio.ensure_future(unblock()))
            got = await blocker.blpop([wake], timeout=wait + 1.0)
            timer.cancel()
            if got is not None:
                continue  # work arrived: claim it; the beat keeps its time
        elif wait > 0:
            await asyncio.sleep(wait)
        next_beat = 0.0  # the wait ended at the beat or at the earliest run-at


def _verbs(conn: Any, q: str, k: int) -> tuple[Any, Any, Any]:
    """claim_many, ack_many and promote bound to this queue and worker."""

    async def claim_many() -> list[jobs.Claim]:
        return await jobs.claim_many(conn, q, LEASE_MS, k)

    async def ack_many(claims: list[jobs.Claim]) -> Any:
        return await jobs.ack_many(conn, q, [(c.id, c.token) for c in claims], keep=False)

    async def promote(batch: int) -> int:
        return int(await jobs.promote(conn, q, batch))

    return claim_many, ack_many, promote


def _ack_and_claim(conn: Any, q: str, k: int) -> Any:
    """Variant ``pipelined``: the batch's acks and the next claim in one round trip, with
    the shipped verb ``jobs.ack_and_claim`` (what the runtime's Consumer uses too)."""

    async def ack_and_claim(claims: list[jobs.Claim]) -> list[jobs.Claim]:
        _refused, claimed = await jobs.ack_and_claim(
            conn, q, [(c.id, c.token) for c in claims], LEASE_MS, k, keep=False)
        return claimed

    return ack_and_claim


async def work_consumer(args: Any) -> None:
    """The runtime's ``echomq.runtime.consumer.Consumer`` with its defaults but the concurrency."""
    from echomq.runtime import consumer as consumer_mod
    conn = await AsyncConnector.connect(args.url, wire=_wire(args.variant))

    async def on_job(job: Any) -> None:  # async: a plain function would go to a thread pool
        RECORD()

    cons = consumer_mod.Consumer(conn, args.queue, on_job, concurrency=args.concurrency)
    ready()
    await cons.run(asyncio.Event())


def work_app(args: Any) -> None:
    """``run_worker`` of an ``App`` with the no-op task as an ``async def`` (a plain function
    would run in a thread), every other Worker option at its default; variant ``app`` asks for
    wire 4, ``app-6`` leaves the choice to the App (6 where the server has the module)."""
    from echomq import App
    from echomq.tasks.worker import run_worker
    RECORD.arm(args.n, args.out)
    app = App(args.url, wire=4 if args.variant == "app" else None, default_queue=args.queue)

    @app.task(name=TASK)
    async def noop() -> None:
        RECORD()

    ready()
    run_worker(app, [args.queue], concurrency=args.concurrency)


def main() -> None:
    args = parse()
    if args.variant == "sync":
        produce_sync(args)
    elif args.role == "work" and args.variant in ("app", "app-6"):
        work_app(args)
    else:
        asyncio.run(produce(args) if args.role == "produce" else work(args))


if __name__ == "__main__":
    main()
