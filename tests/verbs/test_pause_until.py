"""Pauses with an end (DESIGN §3c: ``jobs.pause(q, until=)``, ``groups.pause(q, g, until=)``):
the pause ends by itself at its instant on the SERVER clock, and leaves a due token so the
idle consumers re-read their next due instant; key by key, single server and cluster."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from echomq.core import ids, keyspace
from echomq.verbs import groups, jobs
from tests.support.clients import server_ms

pytestmark = pytest.mark.topologies


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def test_a_queue_paused_until_an_instant_resumes_by_itself(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    raw.delete(k(queue, "due"))
    until = server_ms(raw) + 400
    assert run(jobs.pause, queue, until=until) is True
    assert raw.lrange(k(queue, "due"), 0, -1) == [b"1"]  # the idle consumers re-plan
    assert run(jobs.is_paused, queue) is True
    assert run(jobs.paused_until, queue) == until
    assert 0 < run(jobs.next_due_ms, queue) <= 400  # the pause's end is a due instant
    assert run(jobs.claim, queue, 1000) is None
    time.sleep(0.45)
    assert run(jobs.is_paused, queue) is False
    assert run(jobs.claim, queue, 1000).id == jid


def test_pausing_again_moves_or_drops_the_end(run, raw, queue):
    now = server_ms(raw)
    run(jobs.pause, queue, until=now + 60_000)
    assert run(jobs.pause, queue, until=dt.datetime.fromtimestamp((now + 90_000) / 1000,
                                                                  dt.UTC)) is False
    assert run(jobs.paused_until, queue) == now + 90_000
    assert run(jobs.pause, queue) is False  # without an end: until resumed
    assert run(jobs.paused_until, queue) is None and run(jobs.is_paused, queue) is True
    assert run(jobs.resume, queue) is True and run(jobs.is_paused, queue) is False


def test_an_end_already_past_resumes(run, raw, queue):
    run(jobs.pause, queue)
    assert run(jobs.pause, queue, until=server_ms(raw) - 1) is False
    assert run(jobs.is_paused, queue) is False
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]


def test_a_group_paused_until_an_instant_resumes_at_the_claim_after_it(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="g")
    raw.delete(k(queue, "due"))
    until = server_ms(raw) + 400
    run(groups.pause, queue, "g", until=until)
    st = run(groups.stats, queue)["g"]
    assert st.paused and st.paused_until == until
    assert raw.zscore(k(queue, "gwait"), "g") == until
    assert raw.zscore(k(queue, "ring"), "g") is None
    assert raw.lrange(k(queue, "due"), 0, -1) == [b"1"]
    assert 0 < run(jobs.next_due_ms, queue) <= 400
    assert run(jobs.claim, queue, 1000) is None
    time.sleep(0.45)
    assert run(jobs.claim, queue, 1000).id == jid  # the claim's reopen resumed it
    st = run(groups.stats, queue)["g"]
    assert not st.paused and st.paused_until is None


def test_a_group_pause_outlives_an_earlier_block(run, raw, queue):
    run(jobs.enqueue, queue, ids.mint(), b"x", group="g")
    until = server_ms(raw) + 200
    run(groups.pause, queue, "g", until=until)
    raw.zadd(k(queue, "gwait"), {"g": server_ms(raw) + 20})  # a shorter block overwrote it
    time.sleep(0.05)
    assert run(jobs.claim, queue, 1000) is None  # the block ended, the pause did not
    assert raw.zscore(k(queue, "gwait"), "g") == until
    time.sleep(0.45)
    assert run(jobs.claim, queue, 1000) is not None


def test_resume_ends_a_pause_with_an_end(run, raw, queue):
    run(jobs.enqueue, queue, ids.mint(), b"x", group="g")
    run(groups.pause, queue, "g", until=server_ms(raw) + 60_000)
    run(groups.resume, queue, "g")
    assert run(groups.stats, queue)["g"].paused_until is None
    assert run(jobs.claim, queue, 1000) is not None


def test_bad_ends_are_refused_before_any_io(run, snap, queue):
    before = snap(queue)
    with pytest.raises(TypeError):
        run(jobs.pause, queue, until=1.5)
    with pytest.raises(TypeError):
        run(groups.pause, queue, "g", until="soon")
    assert snap(queue) == before
