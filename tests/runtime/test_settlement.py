"""A refused outcome tells "already settled" from "another holder owns it" (
point 8), in the log and in the Consumer's counters.

"Already settled" is a retried call whose first try landed (its reply lost, as in a server
restart): here the handler itself settles its own job with the same token first, which is
exactly the state such a first try leaves. "Another holder" is a lease that lapsed and was
claimed again under a new token.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from echomq import AsyncConnector
from echomq.core import errors, ids, keyspace
from echomq.runtime.consumer import Consumer
from echomq.runtime.events import Event
from echomq.runtime.handler import Job
from echomq.verbs import jobs
from tests.support.polling import until


def _run_one(url: str, queue: str, handler, **opts) -> tuple[Consumer, list[Event]]:
    events: list[Event] = []

    async def main() -> Consumer:
        conn = await AsyncConnector.connect(url)
        await jobs.enqueue(conn, queue, ids.mint(), b"p")
        consumer = Consumer(conn, queue, handler, concurrency=1, beat_ms=50,
                            on_event=events.append, **opts)
        stop = asyncio.Event()
        task = asyncio.ensure_future(consumer.serve(stop, grace_s=5))
        await until(lambda: any(e.kind in ("completed", "lost", "settled", "retrying",
                                            "delayed") for e in events))
        await asyncio.sleep(0.05)
        stop.set()
        await task
        await conn.close()
        return consumer

    return asyncio.run(main()), events


@pytest.mark.parametrize("keep", [False, True], ids=["deleted", "kept"])
def test_an_ack_whose_first_try_landed_is_already_settled(url, queue, caplog, keep):
    async def handler(job: Job) -> None:
        # the first try of this very ack, landed (its reply is what a restart loses)
        side = await AsyncConnector.connect(url)
        await jobs.ack(side, queue, job.id, job.token, keep=keep)
        await side.close()

    caplog.set_level(logging.INFO, logger="echomq.consumer")
    opts = {"keep_completed": 100} if keep else {}
    consumer, events = _run_one(url, queue, handler, **opts)
    assert consumer.stats.lost == 0
    assert consumer.stats.already_settled == 1
    assert consumer.stats.completed == 1
    assert [e.kind for e in events if e.kind != "started"] == ["settled"]
    assert events[-1].info["fate"] == ("settled" if keep else "gone")
    assert "another holder" not in caplog.text
    assert "ok already settled" in caplog.text


def test_a_retry_whose_first_try_landed_is_already_settled(url, queue, caplog):
    async def handler(job: Job) -> None:
        side = await AsyncConnector.connect(url)
        await jobs.retry(side, queue, job.id, job.token, 60_000, 5, "boom")
        await side.close()
        raise RuntimeError("boom")

    caplog.set_level(logging.INFO, logger="echomq.consumer")
    consumer, _events = _run_one(url, queue, handler)
    assert (consumer.stats.lost, consumer.stats.already_settled) == (0, 1)
    assert "fail already settled" in caplog.text


def test_a_job_another_holder_took_is_still_lost(url, raw, queue, caplog):
    """The lease lapsed and a second claim holds the job: that refusal stays "lost"."""
    async def handler(job: Job) -> None:
        side = await AsyncConnector.connect(url)
        raw.zadd(keyspace.queue_key(queue, "active"), {job.id: 0})  # the lease lapses
        assert await jobs.reap(side, queue, 10) == 1
        again = await jobs.claim(side, queue, 60_000)
        assert again is not None and again.token == job.token + 1
        await side.close()

    caplog.set_level(logging.INFO, logger="echomq.consumer")
    consumer, events = _run_one(url, queue, handler)
    assert (consumer.stats.lost, consumer.stats.already_settled) == (1, 0)
    assert consumer.stats.completed == 0
    assert "another holder owns it now" in caplog.text
    assert [e.kind for e in events if e.kind != "started"] == ["lost"]


def test_fate_verb(run, queue):
    jid = ids.mint()
    assert run(jobs.fate, queue, jid, 1) == "gone"
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 30_000)
    assert run(jobs.fate, queue, jid, c.token) == "moved"  # still running: not settled
    run(jobs.ack, queue, jid, c.token, keep=True)
    assert run(jobs.fate, queue, jid, c.token) == "settled"
    assert run(jobs.fate, queue, jid, c.token + 1) == "moved"
    with pytest.raises(errors.StateError):
        run(jobs.ack, queue, jid, c.token)


@pytest.mark.slow
def test_a_checkpoint_refused_for_now_is_retried_not_given_up(tmp_path):
    """A server that is full (OOM) for a moment refuses a lease checkpoint: the consumer
    retries it (it gave the lease up before, so the job was reaped and ran twice)."""
    import valkey

    from echomq.embedded.server import EmbeddedServer

    runs: list[str] = []

    with EmbeddedServer(ephemeral=True, extra_args=["--maxmemory-policy", "noeviction"]) as srv:
        raw = valkey.Valkey.from_url(srv.url)

        async def handler(job: Job) -> None:
            runs.append(job.id)
            if len(runs) > 1:
                return
            await asyncio.sleep(0.3)
            raw.config_set("maxmemory", "1")  # full: every growing write is refused
            await asyncio.sleep(0.6)  # the checkpoint at ~500 ms is refused with OOM
            raw.config_set("maxmemory", "0")
            await asyncio.sleep(1.6)  # past the first lease (1.5 s): only a retried
            # checkpoint keeps the job from being reaped and run again

        async def main() -> Consumer:
            conn = await AsyncConnector.connect(srv.url)
            await jobs.enqueue(conn, "cp", ids.mint(), b"p")
            consumer = Consumer(conn, "cp", handler, concurrency=2, beat_ms=50, lease_ms=1_500)
            stop = asyncio.Event()
            task = asyncio.ensure_future(consumer.serve(stop, grace_s=5))
            await until(lambda: consumer.stats.completed + consumer.stats.lost >= 1, 15)
            stop.set()
            await task
            await conn.close()
            return consumer

        consumer = asyncio.run(main())
        oom = raw.info("errorstats").get("errorstat_OOM", {}).get("count", 0)
        raw.close()
    assert oom >= 1  # the checkpoint was refused at least once
    assert len(runs) == 1
    assert (consumer.stats.completed, consumer.stats.lost, consumer.stats.reaped) == (1, 0, 0)


def test_a_drain_right_after_the_handlers_still_lands_every_batched_ack(url, queue):
    """A success's task ends as soon as its ack is queued (the ack rides the next batched
    ack_and_claim): a drain that starts while those acks are still on their way must wait
    for them, count every job completed and leave no row active."""
    n = 40

    async def main() -> tuple[Consumer, int, dict[str, int]]:
        conn = await AsyncConnector.connect(url)
        await jobs.enqueue_many(conn, queue, [(ids.mint(), b"p") for _ in range(n)])

        async def handler(job: Job) -> None:
            return None

        consumer = Consumer(conn, queue, handler, concurrency=n, pooled=True)
        assert await consumer.beat() == n
        await asyncio.sleep(0)  # every handler ran and queued its ack; none has landed
        assert not consumer.inflight and consumer.stats.completed == 0
        left = await consumer.drain(10)
        counts = await jobs.counts(conn, queue)
        await conn.close()
        return consumer, left, counts

    consumer, left, counts = asyncio.run(main())
    assert (left, consumer.abandoned) == (0, [])
    assert consumer.stats.completed == n
    assert (counts["active"], counts["pending"]) == (0, 0)
