"""A run-at that leads the schedule wakes the beat loop that planned a later wake.

A beat loop (a lone Consumer's legs, a Metronome) sleeps until its next beat or the earliest
run-at it read after its last promote. An admission whose run-at comes before the
schedule's head leaves one token on ``emq:{q}:due`` (scripts: ``includes/lead.lua``;
native: ``EMQ.SCHEDULE``/``EMQ.DELAY``/``EMQ.RESCHEDULE``); an idle consumer pops it beside
its wake list and the loop re-reads the head and re-plans. Real Valkey, both connectors and
both wires (``run``), the same token on each.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from echomq import AsyncConnector
from echomq.core import ids, keyspace
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.runtime.metronome import Metronome
from echomq.tasks.app import App
from echomq.verbs import jobs
from tests.support.clients import WIRES, server_ms
from tests.support.polling import wait_for
from tests.support.workers import serving


def due_tokens(raw, queue: str) -> list[bytes]:
    return raw.lrange(keyspace.queue_key(queue, "due"), 0, -1)


def take(raw, queue: str) -> list[bytes]:
    """The due list's tokens, then empty it (as a consumer's pop would)."""
    got = due_tokens(raw, queue)
    raw.delete(keyspace.queue_key(queue, "due"))
    return got


def test_a_schedule_admission_leaves_a_token_only_when_it_leads(run, raw, queue):
    run(jobs.enqueue_in, queue, ids.mint(), b"p", 60_000)
    assert take(raw, queue) == [b"1"]  # the first run-at leads an empty schedule
    run(jobs.enqueue_in, queue, ids.mint(), b"p", 90_000)
    assert take(raw, queue) == []  # behind the head: the loop's plan already covers it
    run(jobs.enqueue_in, queue, ids.mint(), b"p", 30_000)
    run(jobs.enqueue_in, queue, ids.mint(), b"p", 20_000)
    assert take(raw, queue) == [b"1"]  # two new heads, still one token kept
    head = int(raw.zrange(keyspace.queue_key(queue, "schedule"), 0, 0, withscores=True)[0][1])
    run(jobs.enqueue_at, queue, ids.mint(), b"p", head)
    assert take(raw, queue) == []  # a tie with the head: the loop wakes then anyway
    run(jobs.enqueue, queue, ids.mint(), b"p")
    assert take(raw, queue) == []  # claimable now: the wake list's business, not the due's


def test_delay_and_retry_lead_like_an_admission(run, raw, queue):
    for _ in range(3):
        run(jobs.enqueue, queue, ids.mint(), b"p")
    run(jobs.enqueue_in, queue, ids.mint(), b"p", 60_000)
    take(raw, queue)
    a, b, c = (run(jobs.claim, queue, 30_000) for _ in range(3))
    run(jobs.delay, queue, a.id, a.token, 90_000)
    assert take(raw, queue) == []  # behind the 60 s head
    run(jobs.delay, queue, b.id, b.token, 5_000)
    assert take(raw, queue) == [b"1"]  # ahead of it
    run(jobs.retry, queue, c.id, c.token, 1_000, 5, "boom")
    assert take(raw, queue) == [b"1"]  # 1 s leads the 5 s head


def test_bulk_admissions_lead_with_their_earliest_run_at(run, raw, queue):
    run(jobs.enqueue_in, queue, ids.mint(), b"p", 60_000)
    take(raw, queue)
    run(jobs.schedule_many, queue, [(ids.mint(), b"p", "in", 70_000),
                                    (ids.mint(), b"p", "in", 80_000)])
    assert take(raw, queue) == []
    run(jobs.schedule_many, queue, [(ids.mint(), b"p", "in", 70_000),
                                    (ids.mint(), b"p", "in", 5_000)])
    assert take(raw, queue) == [b"1"]
    run(jobs.admit_many, queue, [(ids.mint(), b"p", "now", 0), (ids.mint(), b"p", "in", 1_000)])
    assert take(raw, queue) == [b"1"]
    run(jobs.admit_many, queue, [(ids.mint(), b"p", "in", 2_000)])
    assert take(raw, queue) == []


@pytest.mark.skipif(6 not in WIRES, reason="the native module was not built")
def test_native_reschedule_leads_when_it_moves_a_job_ahead(raw, url, queue):
    from tests.support.clients import Runner

    run = Runner("sync", url, wire=6)
    try:
        late, early = ids.mint(), ids.mint()
        run(jobs.enqueue_in, queue, early, b"p", 60_000)
        run(jobs.enqueue_in, queue, late, b"p", 90_000)
        take(raw, queue)
        run(jobs.reschedule, queue, late, "in", 120_000)
        assert take(raw, queue) == []
        run(jobs.reschedule, queue, late, "in", 1_000)
        assert take(raw, queue) == [b"1"]
    finally:
        run.close()


# -- the loops ---------------------------------------------------------------------------

LONG_BEAT_MS = 1_000
AHEAD_MS = 300
# Without the lead, the job waits for the loop's next beat: it starts up to LONG_BEAT_MS
# after its admission (about 1000 ms here, the loop having just planned a full beat). With
# it, about AHEAD_MS. The bound leaves 400 ms for load on a shared machine; it could fail
# only if the loop learned nothing (the old behaviour) or the machine stalled for 400 ms.
BOUND_MS = 700


async def _lateness(url: str, queue: str, wire: int, pooled: bool,
                    held_elsewhere: bool = False) -> int:
    """ms (SERVER clock) from the admission to the handler's start of a job due AHEAD_MS
    out, admitted while the loop sleeps toward its next (1 s) beat. ``held_elsewhere``:
    another Metronome (another process's, which hears of no token) holds the queue's lease,
    so the one the consumer tells must promote the led run-at all the same."""
    conn = await AsyncConnector.connect(url, wire=wire)
    prod = await AsyncConnector.connect(url, wire=wire)
    started: list[int] = []

    async def handler(job: Job) -> None:
        started.append(await jobs.server_now_ms(prod))

    consumer = Consumer(conn, queue, handler, beat_ms=LONG_BEAT_MS, pooled=pooled)
    stop = asyncio.Event()
    loops = []
    if held_elsewhere:
        holder = Metronome(conn, [queue], beat_ms=LONG_BEAT_MS)
        loops.append(asyncio.ensure_future(holder.run(stop)))
        await asyncio.sleep(0.05)  # its first beat takes the lease
    if pooled:  # the worker's wiring: the metronome re-plans for the due tokens popped
        metronome = Metronome(conn, [queue], beat_ms=LONG_BEAT_MS,
                              on_due=lambda q, ms: consumer.note_due(ms))
        consumer.on_lead = metronome.lead  # before the consumer runs, as the worker does
        loops.append(asyncio.ensure_future(metronome.run(stop)))
    loops.append(asyncio.ensure_future(consumer.serve(stop, 5)))
    await asyncio.sleep(0.25)  # the first beat ran and planned the next, 1 s out
    sent = await jobs.server_now_ms(prod)
    await jobs.enqueue_in(prod, queue, ids.mint(), b"p", AHEAD_MS)
    for _ in range(300):
        if started:
            break
        await asyncio.sleep(0.01)
    if held_elsewhere:  # the lease stayed with the holder all along
        assert not metronome.held and holder.held == {queue}
    stop.set()
    await asyncio.gather(*loops)
    await conn.close()
    await prod.close()
    assert started, "the job never started"
    return started[0] - sent


@pytest.mark.slow
@pytest.mark.parametrize("wire", WIRES, ids=[f"wire{w}" for w in WIRES])
@pytest.mark.parametrize("pooled", [False, True], ids=["lone", "pooled+metronome"])
def test_a_job_due_before_the_planned_beat_starts_at_its_run_at(url, queue, wire, pooled):
    late = asyncio.run(_lateness(url, queue, wire, pooled))
    assert AHEAD_MS <= late < BOUND_MS, f"started {late} ms after its admission"


@pytest.mark.slow
@pytest.mark.parametrize("wire", WIRES, ids=[f"wire{w}" for w in WIRES])
def test_a_metronome_promotes_a_led_run_at_on_a_queue_held_elsewhere(url, queue, wire):
    late = asyncio.run(_lateness(url, queue, wire, pooled=True, held_elsewhere=True))
    assert AHEAD_MS <= late < BOUND_MS, f"started {late} ms after its admission"


@pytest.mark.parametrize("wire", WIRES, ids=[f"wire{w}" for w in WIRES])
def test_a_worker_starts_a_job_due_before_its_planned_beat(url, raw, queue, wire):
    """The path a user takes: a Worker (pool mode: Metronome + consumers) at a 1 s beat."""
    app = App(url, wire=wire)
    started: list[int] = []

    @app.task(queue=queue, name="soon")
    def soon() -> None:
        started.append(server_ms(raw))

    try:
        app.job(ids.mint())  # connected before the clock starts
        with serving(app, [queue], beat_ms=LONG_BEAT_MS) as worker:
            # the metronome's first beat ran and planned the next, 1 s out
            wait_for(lambda: worker.metronome is not None and worker.metronome.stats.beats,
                     5, "the metronome's first beat")
            time.sleep(0.1)
            sent = server_ms(raw)
            soon.enqueue_in(AHEAD_MS)
            wait_for(lambda: bool(started), 3, "the job's start")
    finally:
        app.close()
    assert AHEAD_MS <= started[0] - sent < BOUND_MS
