"""The Metronome: the lease script, one pass per beat across contenders, takeover after the
holder dies, and the legs it runs (reap, promote)."""

from __future__ import annotations

import asyncio
import time

import pytest

from echomq import AsyncConnector, native
from echomq.core import ids, keyspace
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.runtime.metronome import Metronome, hold
from echomq.verbs import jobs


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def test_lease_script_holds_renews_refuses_and_releases(conn, raw, queue):
    key = k(queue, "metronome")
    assert hold(conn, queue, "a", 500) == 2
    assert raw.get(key) == b"a" and 0 < raw.pttl(key) <= 500
    assert hold(conn, queue, "a", 800) == 1
    assert 500 < raw.pttl(key) <= 800
    assert hold(conn, queue, "b", 800) == 0
    assert raw.get(key) == b"a"
    assert hold(conn, queue, "b", 800, release=True) == 0
    assert hold(conn, queue, "a", 800, release=True) == 1
    assert not raw.exists(key)
    assert hold(conn, queue, "b", 800) == 2


def test_hold_guards_before_io(conn, queue, snap):
    with pytest.raises(ValueError):
        hold(conn, queue, "a", 0)
    with pytest.raises(TypeError):
        hold(conn, queue, 5, 100)  # type: ignore[arg-type]
    assert snap(queue) == {}


@pytest.mark.slow
def test_one_pass_per_beat_and_takeover_within_two_beats(url, queue):
    beat = 50
    passes: list[tuple[str, float]] = []

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        a = Metronome(conn, [queue], beat_ms=beat, owner="a",
                      on_pass=lambda q, c: passes.append(("a", time.monotonic())))
        b = Metronome(conn, [queue], beat_ms=beat, owner="b",
                      on_pass=lambda q, c: passes.append(("b", time.monotonic())))
        stop = asyncio.Event()
        ta = asyncio.ensure_future(a.run(stop))
        await asyncio.sleep(0.02)
        tb = asyncio.ensure_future(b.run(stop))
        await asyncio.sleep(1.0)
        assert a.stats.beats >= 15 and b.stats.beats >= 15
        assert a.stats.passes[queue] >= 15
        assert b.stats.passes[queue] == 0  # b contended every beat and never ran the legs
        # the holder dies without releasing (a crash): b takes over once the lease lapses
        ta.cancel()
        died = time.monotonic()
        await asyncio.sleep(0.5)
        stop.set()
        await tb
        first_b = min(t for who, t in passes if who == "b")
        last_a = max(t for who, t in passes if who == "a")
        assert last_a <= died
        # the lease lapses two beats after a's last renewal; b's next beat takes it
        assert first_b - last_a <= 3 * beat / 1000 + 0.06
        await conn.close()

    asyncio.run(main())


def test_metronome_reaps_and_promotes_for_a_pooled_consumer(url, raw, queue):
    """A pooled consumer never runs the legs itself: a due scheduled job waits until a
    Metronome promotes it, and an expired lease comes back only through its reap."""
    ran: list[str] = []

    async def handler(job: Job) -> None:
        ran.append(job.id)

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        due = ids.mint()
        await jobs.enqueue_in(conn, queue, due, b"p", 0)
        stalled = ids.mint()
        await jobs.enqueue(conn, queue, stalled, b"p")
        held = await jobs.claim(conn, queue, 50)  # a lease nobody will ack
        assert held is not None and held.id == stalled
        stop = asyncio.Event()
        consumer = Consumer(conn, queue, handler, pooled=True, beat_ms=50)
        tc = asyncio.ensure_future(consumer.serve(stop, 2))
        await asyncio.sleep(0.4)
        assert ran == []  # nothing promoted or reaped without the metronome
        assert raw.zscore(k(queue, "schedule"), due) is not None
        metronome = Metronome(conn, [queue], beat_ms=50)
        tm = asyncio.ensure_future(metronome.run(stop))
        deadline = time.monotonic() + 3
        while len(ran) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.gather(tc, tm)
        assert sorted(ran) == sorted([due, stalled])
        assert metronome.stats.promoted == 1 and metronome.stats.reaped == 1
        assert not raw.exists(k(queue, "metronome"))  # released on stop
        await conn.close()

    asyncio.run(main())


def test_metronome_wakes_at_a_run_at_between_beats(url, raw, queue):
    """With a 2 s beat, a job due 300 ms after the pool starts is promoted at its run-at
    (the Metronome read the next run-at after its pass), not at the next beat."""
    started: dict[str, int] = {}

    def server_ms() -> int:
        secs, micros = raw.time()
        return secs * 1000 + micros // 1000

    async def handler(job: Job) -> None:
        started[job.id] = server_ms()

    async def main() -> tuple[str, int]:
        conn = await AsyncConnector.connect(url)
        jid = ids.mint()
        await jobs.enqueue_in(conn, queue, jid, b"p", 300)
        run_at = int(raw.zscore(k(queue, "schedule"), jid))
        stop = asyncio.Event()
        consumer = Consumer(conn, queue, handler, pooled=True, beat_ms=2_000)
        metronome = Metronome(conn, [queue], beat_ms=2_000)
        tasks = [asyncio.ensure_future(consumer.serve(stop, 2)),
                 asyncio.ensure_future(metronome.run(stop))]
        deadline = time.monotonic() + 3
        while jid not in started and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*tasks)
        await conn.close()
        return jid, run_at

    jid, run_at = asyncio.run(main())
    assert 0 <= started[jid] - run_at <= 60


@pytest.mark.parametrize("wire", [4, 6] if native.available() else [4])
def test_legs_promote_past_a_grouped_row_on_either_wire(url, raw, queue, wire):
    """EMQ.PROMOTE refuses a due grouped row (a documented native divergence); the legs fall back to
    the script for that pass, so the grouped row reaches its lane and flat jobs still flow."""
    from echomq.runtime.beat import Legs, run_legs

    grouped, flat = ids.mint(), ids.mint()

    async def main() -> None:
        conn = await AsyncConnector.connect(url, wire=wire)
        await jobs.enqueue_at(conn, queue, grouped, b"g", 0)
        raw.hset(keyspace.job_key(queue, grouped), "group", "acme")
        await jobs.enqueue_at(conn, queue, flat, b"f", 0)
        counts = await run_legs(conn, queue, Legs(), 1)
        assert counts.promoted == 2
        await conn.close()

    asyncio.run(main())
    assert raw.zrange(keyspace.lane_key(queue, "acme"), 0, -1) == [grouped.encode()]
    assert raw.zrange(k(queue, "pending"), 0, -1) == [flat.encode()]
