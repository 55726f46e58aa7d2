"""A pause with an end resumes at its instant, not at the next beat (DESIGN §3c).

At a 3 s beat, a job held by a queue (or group) pause that is then given an end T starts
within 250 ms of T, where without the wake it would wait for the next beat (2 s or more
after T): the pause script leaves a due token, the beat loop re-reads its next due instant
(the pause's end counts) and wakes then, and since no promote leaves a wake token for that
instant it tells the idle claim loop it is due now. The bound leaves room for a loaded
2-core machine (one full run saw 164 ms once); the typical figure, a few ms, is measured by
``bench/time_controls.py`` (BENCHMARKS.md). Measured on the SERVER clock from T itself (the
handler reads ``TIME`` when it starts), through a Worker (Metronome + consumers) and a lone
Consumer, on both wires and on a single server and a cluster."""

from __future__ import annotations

import asyncio
import time

import pytest

from echomq import AsyncConnector
from echomq.core import ids
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.tasks.app import App
from echomq.verbs import groups, jobs
from tests.support.clients import WIRES, client_for, server_ms
from tests.support.polling import wait_for
from tests.support.workers import serving

pytestmark = [pytest.mark.slow, pytest.mark.topologies]

BEAT_MS = 3_000
PAUSE_MS = 600  # from the pause to its end: inside one beat
BOUND_MS = 250


def pause(conn, queue: str, what: str, until: int | None = None) -> None:
    if what == "queue":
        jobs.pause(conn, queue, until=until)
    else:
        groups.pause(conn, queue, "g", until=until)


@pytest.mark.parametrize("what", ["queue", "group"])
@pytest.mark.parametrize("wire", WIRES, ids=[f"wire{w}" for w in WIRES])
def test_a_worker_resumes_within_the_bound_of_the_pause_end(url, queue, wire, what):
    app = App(url, wire=wire)
    raw = client_for(url)
    started: list[int] = []

    @app.task(queue=queue, name="held", group="g" if what == "group" else None)
    def held() -> None:
        started.append(server_ms(raw))

    conn = app.connector()
    try:
        with serving(app, [queue], beat_ms=BEAT_MS) as worker:
            wait_for(lambda: worker.metronome is not None and worker.metronome.stats.beats,
                     5, "the metronome's first beat")
            # paused until resumed, a job waits; the claim loop that tried it idles
            pause(conn, queue, what)
            held.enqueue()
            time.sleep(0.15)  # the beat planned its next wake, a second out
            # then the pause is given an end: nothing is enqueued or promoted at it
            until = server_ms(raw) + PAUSE_MS
            pause(conn, queue, what, until)
            wait_for(lambda: bool(started), 5, "the job's start")
    finally:
        app.close()
    late = started[0] - until
    assert 0 <= late <= BOUND_MS, f"started {late} ms after the pause's end"


@pytest.mark.parametrize("what", ["queue", "group"])
def test_a_lone_consumer_resumes_within_the_bound_of_the_pause_end(url, queue, what):
    late = asyncio.run(_lone(url, queue, what))
    assert 0 <= late <= BOUND_MS, f"started {late} ms after the pause's end"


async def _lone(url: str, queue: str, what: str) -> int:
    conn = await AsyncConnector.connect(url)
    prod = await AsyncConnector.connect(url)
    started: list[int] = []

    async def handler(job: Job) -> None:
        started.append(await jobs.server_now_ms(prod))

    consumer = Consumer(conn, queue, handler, beat_ms=BEAT_MS)
    stop = asyncio.Event()
    running = asyncio.ensure_future(consumer.serve(stop, 5))
    if what == "queue":
        await jobs.pause(prod, queue)
    else:
        await groups.pause(prod, queue, "g")
    await jobs.enqueue(prod, queue, ids.mint(), b"x", group="g" if what == "group" else None)
    await asyncio.sleep(0.15)
    until = await jobs.server_now_ms(prod) + PAUSE_MS
    if what == "queue":
        await jobs.pause(prod, queue, until=until)
    else:
        await groups.pause(prod, queue, "g", until=until)
    for _ in range(500):  # 5 s: a missed wake shows as lateness, not as a hang
        if started:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await running
    await conn.close()
    await prod.close()
    assert started, "the job never started"
    return started[0] - until
