"""Idle is free: the survey that tells a worker's Metronome which queues need a beat, the one
wait (``runtime.waker``) its idle consumers share, and what an idle worker costs the server.

Each test measures from the event itself (a claim, a lease lapsing, a run-at), so a loaded
machine slows them without failing them."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from echomq import App, AsyncConnector
from echomq.core import ids
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.runtime.metronome import Metronome
from echomq.runtime.survey import BEAT, READY, TRIM, survey
from echomq.runtime.waker import pool
from echomq.tasks.worker import Worker
from echomq.verbs import jobs


def names(queue: str, n: int) -> list[str]:
    return [f"{queue}-{i}" for i in range(n)]


def test_the_survey_names_only_the_queues_with_something(conn, queue):
    empty, ready, far, soon, leased, dead = names(queue, 6)
    jobs.enqueue(conn, ready, ids.mint(), b"p")
    jobs.enqueue_in(conn, far, ids.mint(), b"p", 60_000)
    jobs.enqueue_in(conn, soon, ids.mint(), b"p", 200)
    jobs.enqueue(conn, leased, ids.mint(), b"p")
    assert jobs.claim(conn, leased, 30_000) is not None
    jobs.enqueue(conn, dead, ids.mint(), b"p")
    got = jobs.claim(conn, dead, 30_000)
    assert got is not None
    jobs.retry(conn, dead, got.id, got.token, 0, 1, "boom")  # out of attempts: dead
    # 41 quiet queues around them: past one EXISTS chunk of the script
    quiet = names(queue + "q", 41)
    found = {s.queue: s for s in survey(conn, [empty, *quiet, ready, far, soon, leased, dead],
                                        1_100, True)}
    assert set(found) == {ready, far, soon, leased, dead}
    assert found[ready].mask == READY and found[ready].due_ms is None
    assert found[far].mask == 0 and 55_000 < (found[far].due_ms or 0) <= 60_000
    assert found[soon].mask == BEAT and 0 <= (found[soon].due_ms or -1) <= 200
    assert found[leased].mask == BEAT
    assert found[dead].mask == TRIM
    # without trims the terminal sets are not read
    assert dead not in {s.queue for s in survey(conn, [dead], 1_100, False)}


def test_a_surveying_metronome_beats_only_busy_queues_and_reaps_a_dead_holder(url, queue):
    """200 idle queues cost it a survey a second, not legs per queue per beat; a lease
    nobody renews on one of them (its holder died) is reaped once it lapses."""
    queues = names(queue, 200)
    victim = random.Random(34).choice(queues)

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        await jobs.enqueue(conn, victim, ids.mint(), b"p")
        held = await jobs.claim(conn, victim, 300)  # its holder dies: nobody acks
        assert held is not None
        lapses = time.monotonic() + 0.3
        metronome = Metronome(conn, queues, beat_ms=50, survey=True)
        stop = asyncio.Event()
        task = asyncio.ensure_future(metronome.run(stop))
        while metronome.stats.reaped < 1 and time.monotonic() < lapses + 5:
            await asyncio.sleep(0.01)
        reaped_in = time.monotonic() - lapses
        await asyncio.sleep(0.5)
        stop.set()
        await task
        await conn.close()
        assert metronome.stats.reaped == 1
        assert reaped_in <= 1.0  # beaten from the first survey on: reaped at the lapse
        assert set(metronome.stats.passes) == set(queues)
        # only the victim's legs ran (once a beat while its lease was watched)
        assert {q for q, n in metronome.stats.passes.items() if n} == {victim}

    asyncio.run(main())


def test_one_wait_serves_every_idle_consumer_and_puts_back_a_full_ones_token(url, queue):
    """Pooled consumers of 50 queues under one Waker: a job enqueued on any of them starts
    within a few round trips; a token for a consumer with no free slot goes back on the
    list (another worker's consumer of the queue takes it)."""
    queues = names(queue, 50)
    started: dict[str, float] = {}
    gate = asyncio.Event()

    async def handler(job: Job) -> None:
        started[job.id] = time.monotonic()
        if job.queue == queues[0]:
            await gate.wait()  # holds queues[0]'s one slot

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        consumers = [Consumer(conn, q, handler, pooled=True, beat_ms=50, concurrency=1)
                     for q in queues]
        metronome = Metronome(conn, queues, beat_ms=50, survey=True)
        waker = pool(conn, consumers, metronome, 50)
        assert waker is not None
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(c.run(stop)) for c in consumers]
        tasks += [asyncio.ensure_future(waker.run(stop)),
                  asyncio.ensure_future(metronome.run(stop))]
        await asyncio.sleep(0.3)
        waits = waker.calls
        late = []
        for q in random.Random(7).sample(queues[1:], 10):
            job = ids.mint()
            await jobs.enqueue(conn, q, job, b"p")
            sent = time.monotonic()
            while job not in started and time.monotonic() < sent + 5:
                await asyncio.sleep(0.001)
            late.append(started.get(job, float("inf")) - sent)
        assert max(late) < 0.5, late  # a kick, not a survey or a beat
        assert waker.calls - waits <= 2 * len(late) + 2  # one wait per wakeup, not per queue
        # queues[0]'s consumer is full: its next token stays on the list for another worker
        await jobs.enqueue(conn, queues[0], ids.mint(), b"p")
        await asyncio.sleep(0.1)
        await jobs.enqueue(conn, queues[0], ids.mint(), b"p")
        await asyncio.sleep(0.3)
        assert await conn.call("LLEN", f"emq:{{{queues[0]}}}:wake") == 1
        gate.set()
        stop.set()
        for c in consumers:
            await c.drain(2.0)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await conn.close()

    asyncio.run(main())


@pytest.mark.slow
def test_an_idle_worker_on_300_queues_costs_the_server_little_and_starts_jobs_at_once(
        url: str, raw: Any, queue: str) -> None:
    app = App(url)
    queues = names(queue, 300)
    started: dict[str, float] = {}

    def note(token: str) -> None:
        started[token] = time.monotonic()

    for i, q in enumerate(queues):
        app.task(note, name=f"note{i}", queue=q)

    def calls() -> int:
        return sum(int(v["calls"]) for v in raw.info("commandstats").values())

    async def main() -> None:
        worker = Worker(app, queues, beat_ms=100, concurrency=1, presence=False,
                        task_metrics=False)
        stop = asyncio.Event()
        run = asyncio.ensure_future(worker.run(stop))
        while worker.metronome is None or not worker.metronome.stats.beats:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # settled: its start's reads and writes are behind it
        before, t0 = calls(), time.monotonic()
        await asyncio.sleep(2.0)
        rate = (calls() - before - 1) / (time.monotonic() - t0)
        late = []
        for k, i in enumerate(random.Random(3).sample(range(len(queues)), 5)):
            token = f"t{k}"
            await asyncio.to_thread(app.tasks[f"note{i}"].enqueue, token)
            sent = time.monotonic()
            while token not in started and time.monotonic() < sent + 5:
                await asyncio.sleep(0.002)
            late.append(started.get(token, float("inf")) - sent)
        stop.set()
        await run
        # the old worker: ~5 calls per queue per beat (15,000/s here); now a survey a second
        assert rate < 150, rate
        assert max(late) < 0.5, late

    asyncio.run(main())
