"""A run's outcome is a typed value (``runtime.outcome``): what the runner returns for each
way a handler ends, and what the settler records for each variant, on a real server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echomq import AsyncConnector
from echomq.core import ids
from echomq.runtime import meter, taskstats
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Delay, Job, RateLimited
from echomq.runtime.leases import Held
from echomq.runtime.outcome import (
    DONE,
    Cancelled,
    Completed,
    Delayed,
    Failed,
    Limited,
    Outcome,
    Suspended,
    TimedOut,
)
from echomq.runtime.route import Route
from echomq.runtime.runner import Runner
from echomq.runtime.settling import Ack
from echomq.runtime.stats import ConsumerStats
from echomq.verbs import jobs, metrics, status


def _outcome(handler: Any, *, timeout_ms: int | None = None, keep: bool = False) -> Outcome:
    async def main() -> Outcome:
        runner = Runner(2, None, ConsumerStats(), {})
        job = Job("q", "j1", 1, b"p")
        try:
            return await runner.run(handler, job, Held(job, 30_000, 30_000, 0.1), timeout_ms,
                                    keep)
        finally:
            runner.shutdown()

    return asyncio.run(main())


async def _returns(job: Job) -> dict[str, int]:
    return {"n": 1}


async def _delays(job: Job) -> None:
    raise Delay(1500)


def _limited(job: Job) -> None:
    raise RateLimited(250)


async def _raises(job: Job) -> None:
    raise KeyError("boom")


async def _sleeps(job: Job) -> None:
    await asyncio.sleep(5)


def test_the_runner_returns_one_variant_per_way_a_run_ends() -> None:
    assert _outcome(_returns) is DONE
    assert _outcome(_returns, keep=True) == Completed('{"n":1}')
    assert _outcome(_delays) == Delayed("in", 1500)
    assert _outcome(_limited) == Limited(250)
    failed = _outcome(_raises)
    assert isinstance(failed, Failed) and isinstance(failed.error, KeyError)
    timed = _outcome(_sleeps, timeout_ms=20)
    assert isinstance(timed, TimedOut)
    assert str(timed.error) == "job exceeded its timeout of 0.02 s"
    # a return value the kept result cannot carry fails the run
    kept = _outcome(lambda job: object(), keep=True)
    assert isinstance(kept, Failed) and "not JSON-serializable" in str(kept.error)


def test_each_variant_names_itself_in_the_events() -> None:
    kinds = [Completed.kind, Failed.kind, TimedOut.kind, Delayed.kind, Limited.kind,
             Cancelled.kind, Suspended.kind]
    assert kinds == ["ok", "fail", "timeout", "delay", "rate_limited", "cancelled",
                     "suspended"]


def test_an_ack_entry_names_what_ack_many_sends() -> None:
    job = Job("q", "j1", 3, b"p")
    assert Ack(job, None, 60_000, None).item() == ("j1", 3)
    assert Ack(job, '{"n":1}', 60_000, None).item() == ("j1", 3, '{"n":1}', 60_000)


def test_the_meter_lives_in_the_runtime_and_the_verbs_keep_only_verbs() -> None:
    assert not hasattr(metrics, "Meter") and not hasattr(metrics, "FLUSH_EVERY_S")
    m = meter.Meter()
    m.handled(0.01, True)
    m.handled(0.02, False)
    assert (m.completed, m.failed, len(m.durations)) == (1, 1, 2)
    # one meaning of "settle": the tally's last flush is named for what it does
    assert not hasattr(taskstats.TaskTally, "settle")


@pytest.mark.parametrize("outcome, state", [
    (DONE, None),
    (Failed(KeyError("boom")), "scheduled"),
    (TimedOut(TimeoutError("job exceeded its timeout of 1 s")), "scheduled"),
    (Delayed("in", 60_000), "scheduled"),
    (Limited(60_000), "pending"),
    (Cancelled(), "cancelled"),
    (Suspended("nap", wake_ms=60_000), "active"),
], ids=["completed", "failed", "timed-out", "delayed", "limited", "cancelled", "suspended"])
def test_the_settler_records_every_variant(url: str, queue: str, outcome: Outcome,
                                           state: str | None) -> None:
    async def main() -> tuple[Consumer, Any]:
        conn = await AsyncConnector.connect(url)
        jid = ids.mint()
        await jobs.enqueue(conn, queue, jid, b"p")
        claim = await jobs.claim(conn, queue, 30_000)
        assert claim is not None and claim.id == jid
        if isinstance(outcome, Cancelled):  # a cancel ends only a cancel-marked row
            await jobs.cancel(conn, queue, jid)
        consumer = Consumer(conn, queue, lambda job: None, retry_delay_ms=60_000)
        job = Job(queue, claim.id, claim.token, claim.payload, conn,
                  asyncio.get_running_loop())
        held = Held(job, 30_000, 30_000, 0.1, name="t")
        await consumer.settler.settle(job, Route(lambda job: None), outcome, held)
        info = await status.read(conn, [queue], jid)
        await conn.close()
        return consumer, info

    consumer, info = asyncio.run(main())
    stats = consumer.stats
    if state is None:  # acked: the row is deleted
        assert info is None and stats.completed == 1
        return
    assert info is not None and info.state == state
    if isinstance(outcome, (Failed, TimedOut)):
        assert stats.retried == 1
        assert info.error is not None
    if isinstance(outcome, TimedOut):
        assert stats.timed_out == 1 and "TimeoutError" in info.error
    if isinstance(outcome, Suspended):
        # the step's script made the transition: the settler records nothing, it reports
        assert stats.suspended == 1 and stats.retried == 0 and info.error is None
    if isinstance(outcome, Delayed):
        assert stats.delayed == 1 and info.delays == 1
    if isinstance(outcome, Limited):
        assert stats.rate_limited == 1
    if isinstance(outcome, Cancelled):
        assert stats.cancelled == 1


def test_a_hand_back_is_a_delay_reported_as_handed_back(url: str, queue: str) -> None:
    async def main() -> Consumer:
        conn = await AsyncConnector.connect(url)
        jid = ids.mint()
        await jobs.enqueue(conn, queue, jid, b"p")
        claim = await jobs.claim(conn, queue, 30_000)
        assert claim is not None
        consumer = Consumer(conn, queue, lambda job: None)
        job = Job(queue, claim.id, claim.token, claim.payload, conn,
                  asyncio.get_running_loop())
        await consumer.settler.settle(job, Route(lambda job: None),
                                      Delayed("in", 5_000, handed_back=True),
                                      Held(job, 30_000, 30_000, 0.1))
        await conn.close()
        return consumer

    stats = asyncio.run(main()).stats
    assert (stats.handed_back, stats.delayed) == (1, 0)
