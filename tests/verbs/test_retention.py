"""Retention: the trim script (count, age, batch bound, moved-on rows), the defaults
(completed deleted on ack, dead kept 30 days) and trimming inside the consumer's beats."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from echomq import App, AsyncConnector
from echomq.core import ids, keyspace
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.verbs import jobs, retention
from echomq.verbs.retention import Retention
from tests.support.clients import server_ms


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def completed(conn, queue: str, n: int) -> list[str]:
    """``n`` jobs run and acked with keep=True, oldest first."""
    out = []
    for _ in range(n):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, b"p")
        c = jobs.claim(conn, queue, 10_000)
        jobs.ack(conn, queue, c.id, c.token, keep=True)
        out.append(jid)
    return out


def dead_job(conn, queue: str) -> str:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"p")
    c = jobs.claim(conn, queue, 10_000)
    assert jobs.retry(conn, queue, c.id, c.token, 0, 1, "boom") == "dead"
    return jid


def age(raw, queue: str, which: str, jid: str, ms: int) -> None:
    raw.zadd(k(queue, which), {jid: server_ms(raw) - ms})


def test_trim_by_count_drops_the_oldest(conn, raw, queue):
    got = completed(conn, queue, 6)
    for i, jid in enumerate(got):  # distinct scores, oldest first
        age(raw, queue, "completed", jid, 10_000 - i)
    assert retention.trim(conn, queue, "completed", 2, None) == 4
    assert [m.decode() for m in raw.zrange(k(queue, "completed"), 0, -1)] == got[4:]
    assert [raw.exists(keyspace.job_key(queue, j)) for j in got] == [0] * 4 + [1] * 2
    assert retention.trim(conn, queue, "completed", 2, None) == 0


def test_trim_by_age_on_the_server_clock(conn, raw, queue):
    got = completed(conn, queue, 4)
    age(raw, queue, "completed", got[0], 60_000)
    age(raw, queue, "completed", got[1], 60_000)
    assert retention.trim(conn, queue, "completed", None, 30_000) == 2
    assert [m.decode() for m in raw.zrange(k(queue, "completed"), 0, -1)] == got[2:]


def test_trim_is_bounded_by_its_batch(conn, raw, queue):
    completed(conn, queue, 7)
    assert retention.trim(conn, queue, "completed", 0, None, batch=3) == 3
    assert raw.zcard(k(queue, "completed")) == 4
    assert retention.trim(conn, queue, "completed", 0, None, batch=3) == 3
    assert retention.trim(conn, queue, "completed", 0, None, batch=3) == 1
    assert raw.zcard(k(queue, "completed")) == 0


def test_trim_keeps_a_row_that_moved_on(conn, raw, queue):
    jid = dead_job(conn, queue)
    raw.hset(keyspace.job_key(queue, jid), "state", "pending")  # e.g. revived meanwhile
    assert retention.trim(conn, queue, "dead", 0, None) == 1
    assert raw.exists(keyspace.job_key(queue, jid))
    assert raw.zcard(k(queue, "dead")) == 0


def test_dead_rows_kept_thirty_days_by_default(url, conn, raw, queue):
    old, fresh = dead_job(conn, queue), dead_job(conn, queue)
    age(raw, queue, "dead", old, 31 * 86_400_000)
    age(raw, queue, "dead", fresh, 29 * 86_400_000)

    async def main() -> int:
        aconn = await AsyncConnector.connect(url)
        try:
            return await retention.apply(aconn, queue, retention.DEFAULT)
        finally:
            await aconn.close()

    assert asyncio.run(main()) == 1
    assert not raw.exists(keyspace.job_key(queue, old))
    assert raw.hget(keyspace.job_key(queue, fresh), "state") == b"dead"


def test_retention_guards():
    assert not Retention().keeps_completed
    assert Retention.of(keep_completed=10).keeps_completed
    r = Retention.of(keep_completed_for=timedelta(days=1))
    assert r.keeps_completed and r.keep_completed_for == 86_400_000
    assert Retention().keep_dead_for == 30 * 86_400_000
    with pytest.raises(ValueError):
        Retention.of(keep_completed=-1)
    app = App("valkey://127.0.0.1:1/0", keep_completed_for=timedelta(days=1))
    assert app.retention == Retention.of(keep_completed_for=86_400_000)
    assert App("valkey://127.0.0.1:1/0").retention == retention.DEFAULT
    with pytest.raises(TypeError):
        App("valkey://127.0.0.1:1/0", retention=Retention(), keep_completed=3)
    with pytest.raises(ValueError):
        retention.trim(None, "q", "active", 1, None)
    with pytest.raises(TypeError):
        retention.trim(None, "q", "dead", "1", None)


def test_consumer_keeps_completed_by_count_and_trims_in_its_beats(url, raw, queue):
    done: list[str] = []

    async def handler(job: Job) -> None:
        done.append(job.id)

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        await jobs.enqueue_many(conn, queue, [(ids.mint(), b"p") for _ in range(12)])
        consumer = Consumer(conn, queue, handler, beat_ms=20, keep_completed=5)
        stop = asyncio.Event()
        task = asyncio.ensure_future(consumer.serve(stop, 2))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (
            len(done) == 12 and raw.zcard(k(queue, "completed")) == 5
        ):
            await asyncio.sleep(0.05)
        stop.set()
        await task
        await conn.close()

    asyncio.run(main())
    assert len(done) == 12
    kept = [m.decode() for m in raw.zrange(k(queue, "completed"), 0, -1)]
    assert len(kept) == 5
    for jid in kept:
        assert raw.hget(keyspace.job_key(queue, jid), "state") == b"completed"
    gone = set(done) - set(kept)
    assert not any(raw.exists(keyspace.job_key(queue, j)) for j in gone)
