"""One consumer for a partitioned queue: one slot pool and one claim loop for all its
partitions (``Consumer(..., partitions=[...])``), on a single server and on a cluster whose
primaries hold different partitions. Every job runs once, on its own partition; the pool's
concurrency bounds them all; a partition that gets work while another is busy is served
within a beat; an idle consumer blocks (no polling) and an enqueue on any partition wakes
it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from echomq import AsyncConnector
from echomq.core import ids, keyspace, partitions
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.runtime.spread import Spread
from echomq.verbs import jobs
from tests.support.polling import until


@contextlib.asynccontextmanager
async def served(consumer: Consumer) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.ensure_future(consumer.serve(stop, grace_s=5))
    try:
        yield
    finally:
        stop.set()
        await task


def names(n: int) -> tuple[str, list[str]]:
    base = "pc" + ids.mint()[-8:]
    return base, partitions.names(base, n)


def test_spread_gives_the_turns_to_the_queues_with_work() -> None:
    s = Spread(["a", "b", "c"], probe_s=60, slice_s=0)  # a new turn at every claim
    assert [s.split(9) for _ in range(4)] == [{"b": 9}, {"c": 9}, {"a": 9}, {"b": 9}]
    s.claimed("c", 9, 1)  # gave fewer than asked: empty for now, skipped
    assert [s.split(6) for _ in range(3)] == [{"a": 6}, {"b": 6}, {"a": 6}]
    s.claimed("a", 6, 0)
    s.claimed("b", 6, 0)
    assert not s.any_ready() and s.split(6) == {}
    s.wake("c")
    assert s.split(6) == {"c": 6} and s.split(0) == {}
    one = Spread(["q"], probe_s=60)
    one.claimed("q", 5, 0)  # one queue is always asked: the plain consumer
    assert one.split(5) == {"q": 5} and one.split(0) == {}
    probing = Spread(["a", "b"], probe_s=0, slice_s=0)
    probing.claimed("a", 1, 0)
    probing.claimed("b", 1, 0)
    assert probing.split(2) == {"b": 2}  # every probe asks them all again


def test_a_turn_lasts_its_slice_unless_the_queue_runs_dry() -> None:
    s = Spread(["a", "b"], probe_s=60, slice_s=60)
    assert [s.split(4) for _ in range(3)] == [{"b": 4}] * 3  # one slice: the same queue
    s.claimed("b", 4, 2)  # dry: the next claim moves on at once
    assert s.split(4) == {"a": 4}
    fast = Spread(["a", "b"], probe_s=60, slice_s=0.01)
    first = fast.split(1)
    time.sleep(0.02)
    assert fast.split(1) != first  # the slice ended: the other's turn


@pytest.mark.topologies
def test_one_pool_serves_every_partition_and_settles_each_job_on_its_own(url: str) -> None:
    base, parts = names(3)
    per = 40
    ran: Counter[str] = Counter()
    running, peak = 0, 0

    async def handler(job: Job) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.002)
        running -= 1
        ran[job.queue] += 1

    async def main() -> Consumer:
        async with await AsyncConnector.connect(url, wire="auto") as conn:
            for q in parts:
                await jobs.enqueue_many(conn, q, [(ids.mint(), b"p") for _ in range(per)])
            consumer = Consumer(conn, base, handler, concurrency=6, beat_ms=50,
                                partitions=parts, keep_completed=10_000)
            async with served(consumer):
                await until(lambda: consumer.stats.completed == 3 * per, timeout=20)
            for q in parts:
                counts = await jobs.counts(conn, q)
                assert (counts["completed"], counts["pending"], counts["active"]) == (per, 0, 0)
        return consumer

    consumer = asyncio.run(main())
    assert ran == {q: per for q in parts}
    assert peak <= 6
    assert consumer.queues == parts and consumer.queue == base


def test_a_partition_that_gets_work_while_another_is_busy_waits_at_most_a_beat(
        url: str) -> None:
    base, parts = names(3)
    started: dict[str, float] = {}
    late = {ids.mint() for _ in range(3)}

    async def handler(job: Job) -> None:
        if job.id in late:
            started[job.id] = time.monotonic()
        await asyncio.sleep(0.003)

    async def main() -> None:
        async with await AsyncConnector.connect(url) as conn:
            busy = [(ids.mint(), b"p") for _ in range(2_000)]
            await jobs.enqueue_many(conn, parts[0], busy)
            consumer = Consumer(conn, base, handler, concurrency=4, beat_ms=50,
                                partitions=parts)
            async with served(consumer):
                await until(lambda: consumer.stats.completed >= 100, timeout=20)
                # the other partitions were asked once, empty; work lands on one now
                t0 = time.monotonic()
                for jid in sorted(late):
                    await jobs.enqueue(conn, parts[2], jid, b"p")
                await until(lambda: len(started) == 3, timeout=10)
                assert (await jobs.counts(conn, parts[0]))["pending"] > 0  # still busy
            assert max(started.values()) - t0 < 0.5, started

    asyncio.run(main())


def test_an_idle_consumer_blocks_and_any_partition_wakes_it(url: str, raw) -> None:
    base, parts = names(4)
    started: list[float] = []

    async def handler(job: Job) -> None:
        started.append(time.monotonic())

    def calls() -> int:
        stats = raw.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0))
                   for c in ("evalsha", "emq.claim", "blpop"))

    async def main() -> None:
        async with await AsyncConnector.connect(url) as conn:
            consumer = Consumer(conn, base, handler, concurrency=8, beat_ms=1_000,
                                partitions=parts, pooled=True)
            async with served(consumer):
                await asyncio.sleep(0.3)
                before = calls()
                await asyncio.sleep(1.0)
                # idle for a second at a 1 s beat: a probe claim and a BLPOP, not a poll
                assert calls() - before <= 6
                t0 = time.monotonic()
                await jobs.enqueue(conn, parts[3], ids.mint(), b"p")
                await until(lambda: started, timeout=5)
                assert started[0] - t0 < 0.3  # the wake token, not the 1 s beat

    asyncio.run(main())


def test_the_worker_runs_one_consumer_per_partitioned_queue(url: str) -> None:
    from echomq.tasks.app import App
    from echomq.tasks.worker import Worker

    app = App(url)
    try:
        base = "pw" + ids.mint()[-8:]
        task = app.task(lambda: None, queue=base, name=f"{base}.t", partitions=3)
        other = app.task(lambda: None, queue=base + "x", name=f"{base}.u")
        worker = Worker(app, concurrency=7)
        assert worker.served == {base: task.queues, other.queue: [other.queue]}
        assert worker.queues == [*task.queues, other.queue]
        # a partition named on its own is served on its own
        assert Worker(app, [task.queues[1]]).served == {task.queues[1]: [task.queues[1]]}
        assert keyspace.validate_queue(base) == base
    finally:
        app.close()
