"""Debounce with a cap (DESIGN §3c): one script folds calls with a key into the one job that
waits for it; key by key on both connectors and wires, on a single server and a cluster."""

from __future__ import annotations

import time

import pytest

from echomq.core import ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import groups, jobs
from tests.support.clients import server_ms

pytestmark = pytest.mark.topologies


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def run_at(raw, queue, jid) -> int | None:
    score = raw.zscore(k(queue, "schedule"), jid)
    return None if score is None else int(score)


def test_calls_fold_into_one_job_and_push_its_run_at(run, raw, queue):
    first = ids.mint()
    t0 = server_ms(raw)
    got = run(jobs.debounce, queue, first, b"p0", "key", 500)
    assert got == (Outcome.SCHEDULED, first)
    at0 = run_at(raw, queue, first)
    assert t0 + 500 <= at0 <= server_ms(raw) + 500  # SERVER now + debounce_ms
    time.sleep(0.03)
    again = run(jobs.debounce, queue, ids.mint(), b"p1", "key", 500)
    assert again == (Outcome.DEBOUNCED, first)
    assert run_at(raw, queue, first) > at0
    row = raw.hgetall(keyspace.job_key(queue, first))
    assert row[b"payload"] == b"p1" and row[b"state"] == b"scheduled"
    assert row[b"debounce"] == b"key"
    assert raw.zcard(k(queue, "schedule")) == 1
    # another key is another job
    other = run(jobs.debounce, queue, ids.mint(), b"o", "other", 500)
    assert other.outcome == Outcome.SCHEDULED and other.id != first


def test_the_cap_bounds_the_run_at_from_the_first_call(run, raw, queue):
    first = ids.mint()
    t0 = server_ms(raw)
    run(jobs.debounce, queue, first, b"p", "key", 100, 150)
    cap_at = int(raw.hget(k(queue, "debounce:key"), "first")) + 150
    assert t0 <= cap_at - 150
    for _ in range(5):
        time.sleep(0.04)
        run(jobs.debounce, queue, ids.mint(), b"p", "key", 100, 150)
        assert run_at(raw, queue, first) <= cap_at
    assert run_at(raw, queue, first) == cap_at


def test_a_due_job_not_yet_claimed_takes_the_last_payload(run, raw, queue):
    first = ids.mint()
    run(jobs.debounce, queue, first, b"p0", "key", 20, 40)
    time.sleep(0.06)
    assert run(jobs.promote, queue, 10) == 1
    # due and capped: it stays pending, with the last payload
    assert run(jobs.debounce, queue, ids.mint(), b"p1", "key", 20, 40).id == first
    assert raw.zscore(k(queue, "pending"), first) is not None
    claim = run(jobs.claim, queue, 1000)
    assert claim.id == first and claim.payload == b"p1"


def test_a_due_job_within_its_cap_goes_back_on_the_schedule(run, raw, queue):
    first = ids.mint()
    run(jobs.debounce, queue, first, b"p0", "key", 20, 60_000)
    time.sleep(0.04)
    assert run(jobs.promote, queue, 10) == 1
    assert run(jobs.debounce, queue, ids.mint(), b"p1", "key", 20, 60_000).id == first
    assert raw.hget(keyspace.job_key(queue, first), "state") == b"scheduled"
    assert raw.zscore(k(queue, "pending"), first) is None
    assert run_at(raw, queue, first) is not None


def test_a_started_job_is_not_touched_the_next_call_opens_a_window(run, raw, queue):
    first = ids.mint()
    run(jobs.debounce, queue, first, b"p0", "key", 10)
    time.sleep(0.03)
    run(jobs.promote, queue, 10)
    claim = run(jobs.claim, queue, 60_000)
    assert claim.id == first
    second = ids.mint()
    got = run(jobs.debounce, queue, second, b"p1", "key", 10)
    assert got == (Outcome.SCHEDULED, second)
    assert raw.hget(keyspace.job_key(queue, first), "payload") == b"p0"
    # a retry of the first (it ran) is not folded into either
    run(jobs.retry, queue, first, claim.token, 60_000, 5, "boom")
    assert run(jobs.debounce, queue, ids.mint(), b"p2", "key", 10).id == second
    # the first job's end does not release the key the second window owns
    raw.hset(keyspace.job_key(queue, first), "state", "scheduled")
    time.sleep(0.03)
    run(jobs.promote, queue, 10)
    assert raw.hget(k(queue, "debounce:key"), "id") == second.encode()


def test_the_end_of_the_job_releases_its_key(run, raw, queue):
    first = ids.mint()
    run(jobs.debounce, queue, first, b"p0", "key", 10)
    time.sleep(0.03)
    run(jobs.promote, queue, 10)
    claim = run(jobs.claim, queue, 60_000)
    run(jobs.ack, queue, first, claim.token)
    assert raw.exists(k(queue, "debounce:key")) == 0


def test_debounce_composes_with_groups_and_priorities(run, raw, queue):
    a = run(jobs.debounce, queue, ids.mint(), b"a0", "a", 10, group="g", priority=5).id
    run(jobs.debounce, queue, ids.mint(), b"a1", "a", 10, group="h", priority=9)
    b = run(jobs.debounce, queue, ids.mint(), b"b", "b", 10, priority=1).id
    row = raw.hgetall(keyspace.job_key(queue, a))
    # the options of the call that opened the window hold
    assert row[b"group"] == b"g" and row[b"priority"] == b"5" and row[b"payload"] == b"a1"
    time.sleep(0.03)
    run(jobs.promote, queue, 10, native=False)  # EMQ.PROMOTE refuses a grouped row
    assert raw.zscore(keyspace.lane_key(queue, "g"), a) == 5
    assert run(groups.stats, queue)["g"].waiting == 1
    # back on the schedule from its lane: the group leaves the ring with its last job
    assert run(jobs.debounce, queue, ids.mint(), b"a2", "a", 60_000, group="g").id == a
    assert raw.zscore(keyspace.lane_key(queue, "g"), a) is None
    assert raw.zscore(k(queue, "ring"), "g") is None
    assert run(jobs.claim, queue, 1000).id == b


def test_a_debounced_job_with_a_deadline(run, raw, queue):
    first = ids.mint()
    run(jobs.debounce, queue, first, b"p", "key", 50, expires_ms=20)
    time.sleep(0.08)
    run(jobs.promote, queue, 10)
    assert run(jobs.claim, queue, 1000) is None
    assert raw.hget(keyspace.job_key(queue, first), "state") == b"expired"
    # its end released the key
    assert run(jobs.debounce, queue, ids.mint(), b"q", "key", 50).outcome == Outcome.SCHEDULED


def test_bad_arguments_are_refused_before_any_io(run, snap, queue):
    before = snap(queue)
    with pytest.raises(ValueError):
        run(jobs.debounce, queue, ids.mint(), b"x", "key", 0)
    with pytest.raises(ValueError):
        run(jobs.debounce, queue, ids.mint(), b"x", "key", 100, 50)
    with pytest.raises(ValueError):
        run(jobs.debounce, queue, ids.mint(), b"x", "", 100)
    with pytest.raises(TypeError):
        run(jobs.debounce, queue, ids.mint(), b"x", 7, 100)
    assert snap(queue) == before
