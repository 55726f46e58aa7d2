"""Deadlines (DESIGN §3c, ``expires``): a job not started by its deadline ends ``expired``
wherever it waited (pending, a lane, the schedule), checked by the claim, the promote script
and the beat's sweep; on both connectors and wires, on a single server and a cluster."""

from __future__ import annotations

import time

import pytest

from echomq.core import ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import groups, jobs, retention
from tests.support.clients import server_ms

pytestmark = pytest.mark.topologies


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def row(raw, queue, jid):
    return raw.hgetall(keyspace.job_key(queue, jid))


def sets_of(raw, queue, jid, group=None) -> list[str]:
    names = ["pending", "schedule", "active", "dead", "completed", "cancelled", "expired",
             "deadlines"]
    found = [s for s in names if raw.zscore(k(queue, s), jid) is not None]
    if group and raw.zscore(keyspace.lane_key(queue, group), jid) is not None:
        found.append("lane")
    return found


def assert_expired(raw, run, queue, jid, before: int) -> None:
    r = row(raw, queue, jid)
    assert r[b"state"] == b"expired"
    assert before <= int(r[b"expired_at"]) <= server_ms(raw)
    assert sets_of(raw, queue, jid) == ["expired"]
    assert raw.zscore(k(queue, "expired"), jid) == int(r[b"expired_at"])
    assert r[b"attempts"] == b"0"  # it never ran


def test_a_pending_job_past_its_deadline_is_expired_by_the_claim(run, raw, queue):
    late, fresh = ids.mint(), ids.mint()
    before = server_ms(raw)
    run(jobs.admit, queue, late, b"x", expires_ms=30)
    run(jobs.admit, queue, fresh, b"y", expires_ms=60_000)
    deadline = int(row(raw, queue, late)[b"expires"])
    assert before + 30 <= deadline <= server_ms(raw) + 30  # priced on the SERVER clock
    assert raw.zscore(k(queue, "deadlines"), late) == deadline
    time.sleep(0.06)
    got = run(jobs.claim_many, queue, 1000, 10)
    assert [c.id for c in got] == [fresh]
    assert_expired(raw, run, queue, late, before)
    # the claimed job met its deadline: it keeps none, and leaves the deadlines set
    assert b"expires" not in row(raw, queue, fresh)
    assert raw.zscore(k(queue, "deadlines"), fresh) is None
    assert run(jobs.counts, queue)["expired"] == 1
    assert run(jobs.stats, queue)["expired"] == 1


def test_a_grouped_job_past_its_deadline_is_expired_from_its_lane(run, raw, queue):
    late, fresh = ids.mint(), ids.mint()
    before = server_ms(raw)
    run(jobs.admit, queue, late, b"x", group="g", expires_ms=30)
    run(jobs.admit, queue, fresh, b"y", group="g")
    time.sleep(0.06)
    got = run(jobs.claim_many, queue, 1000, 10)
    assert [c.id for c in got] == [fresh]
    assert_expired(raw, run, queue, late, before)
    assert run(groups.stats, queue)["g"].active == 1


def test_a_scheduled_job_past_its_deadline_never_reaches_a_handler(run, raw, queue):
    late = ids.mint()
    before = server_ms(raw)
    run(jobs.admit, queue, late, b"x", mode="in", value=20, expires_ms=40)
    time.sleep(0.07)
    moved = run(jobs.promote, queue, 100)
    assert moved == 1
    if run.wire == 6:
        # EMQ.PROMOTE keeps its contract: it moves the row; the claim expires it
        assert row(raw, queue, late)[b"state"] == b"pending"
    assert run(jobs.claim, queue, 1000) is None
    assert_expired(raw, run, queue, late, before)


def test_the_promote_script_expires_a_due_row_past_its_deadline(run_script, raw, queue):
    late, ok = ids.mint(), ids.mint()
    before = server_ms(raw)
    run_script(jobs.admit, queue, late, b"x", mode="in", value=20, expires_ms=40)
    run_script(jobs.admit, queue, ok, b"y", mode="in", value=20, expires_ms=60_000)
    time.sleep(0.07)
    assert run_script(jobs.promote, queue, 100, native=False) == 2
    assert_expired(raw, run_script, queue, late, before)
    assert row(raw, queue, ok)[b"state"] == b"pending"


@pytest.mark.parametrize("held_by", ["paused queue", "group at its limit", "far run-at"])
def test_the_sweep_expires_what_nothing_pops(run, raw, queue, held_by):
    jid = ids.mint()
    group = None
    if held_by == "paused queue":
        run(jobs.pause, queue)
        run(jobs.admit, queue, jid, b"x", expires_ms=300)
    elif held_by == "group at its limit":
        group = "g"
        run(groups.set_limit, queue, group, 1)
        run(jobs.enqueue, queue, ids.mint(), b"busy", group=group)
        assert run(jobs.claim, queue, 60_000) is not None
        run(jobs.admit, queue, jid, b"x", group=group, expires_ms=300)
    else:
        run(jobs.admit, queue, jid, b"x", mode="in", value=60_000, expires_ms=300)
    before = server_ms(raw)
    assert run(jobs.expire, queue, 100) == 0  # not yet
    due = run(jobs.next_due, queue)
    assert due.deadline_ms is not None and 0 < due.deadline_ms <= 300
    time.sleep(0.35)
    assert run(jobs.next_due, queue).deadline_ms <= 0
    assert run(jobs.expire, queue, 100) == 1
    assert_expired(raw, run, queue, jid, before)
    if group:
        assert raw.zscore(k(queue, "ring"), group) is None
        assert run(groups.stats, queue)[group].waiting == 0


def test_the_sweep_drops_entries_of_jobs_that_started(run, raw, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", expires_ms=2_000)
    claim = run(jobs.claim, queue, 60_000)
    assert claim.id == jid
    # a started job keeps no deadline: a retry after it runs it again
    run(jobs.retry, queue, jid, claim.token, 0, 5, "boom")
    raw.zadd(k(queue, "deadlines"), {jid: 1})  # an entry left behind, long due
    assert run(jobs.expire, queue, 100) == 0
    assert run(jobs.promote, queue, 100) == 1
    assert run(jobs.claim, queue, 60_000).id == jid
    assert raw.zcard(k(queue, "deadlines")) == 0


def test_a_stale_entry_is_only_dropped(run, raw, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", expires_ms=20)
    raw.delete(keyspace.job_key(queue, jid))  # gone (say, deleted by an operator)
    time.sleep(0.04)
    assert run(jobs.expire, queue, 100) == 0
    assert raw.zcard(k(queue, "deadlines")) == 0


def test_an_absolute_deadline_and_the_unique_key_it_releases(run, raw, queue):
    jid = ids.mint()
    at = server_ms(raw) + 30
    run(jobs.admit, queue, jid, b"x", expires_at_ms=at, unique="u1")
    assert int(row(raw, queue, jid)[b"expires"]) == at
    time.sleep(0.05)
    assert run(jobs.claim, queue, 1000) is None
    assert row(raw, queue, jid)[b"state"] == b"expired"
    # its end released the unique key: a new job with the key is admitted
    again = run(jobs.admit, queue, ids.mint(), b"y", unique="u1")
    assert again.outcome == Outcome.ENQUEUED


def test_a_job_with_a_deadline_ahead_runs(run, raw, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", mode="in", value=0, expires_ms=60_000, priority=2)
    assert run(jobs.promote, queue, 10) == 1
    claim = run(jobs.claim, queue, 1000)
    assert claim.id == jid
    run(jobs.ack, queue, jid, claim.token)
    # a queue with no expired job answers the counts it always did
    assert "expired" not in run(jobs.stats, queue)
    assert "expired" not in run(jobs.counts, queue)


def test_expired_rows_are_trimmed_like_dead_ones(run, raw, queue):
    for _ in range(3):
        run(jobs.admit, queue, ids.mint(), b"x", expires_ms=10)
    time.sleep(0.03)
    assert run(jobs.claim, queue, 1000) is None
    assert raw.zcard(k(queue, "expired")) == 3
    assert run(retention.apply, queue, retention.Retention.of(keep_dead=1)) == 2
    assert raw.zcard(k(queue, "expired")) == 1


def test_bad_deadlines_are_refused_before_any_io(run, snap, queue):
    before = snap(queue)
    with pytest.raises(ValueError):
        run(jobs.admit, queue, ids.mint(), b"x", expires_ms=0)
    with pytest.raises(ValueError):
        run(jobs.admit, queue, ids.mint(), b"x", expires_ms=10, expires_at_ms=10)
    with pytest.raises(TypeError):
        run(jobs.admit, queue, ids.mint(), b"x", expires_ms=1.5)
    with pytest.raises(TypeError):
        run(jobs.enqueue_many, queue, [(ids.mint(), b"x", {"expires": "+10"})])
    assert snap(queue) == before
