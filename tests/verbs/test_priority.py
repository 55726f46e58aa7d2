"""Priorities and groups on admission (DESIGN §3b), key by key, on both connectors and wires.

Pending and every lane are scored by the row's priority, so a claim (one ZPOPMIN) takes the
lowest priority first and equal priorities in mint order; every re-admission (promote,
retry via promote, delay via promote, reap, revive) puts the job back at that priority.
"""

from __future__ import annotations

import pytest

from echomq.core import errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import dead, jobs
from tests.support.clients import server_ms


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def row(raw, queue, jid):
    return raw.hgetall(keyspace.job_key(queue, jid))


@pytest.mark.topologies
def test_priority_scores_pending_and_orders_claims(run, raw, queue):
    minted = [ids.mint() for _ in range(6)]
    pris = [5, 0, 5, 1_000_000, 1, 0]
    for jid, pri in zip(minted, pris, strict=True):
        assert run(jobs.enqueue, queue, jid, b"x", priority=pri) == Outcome.ENQUEUED
    assert [(m.decode(), s) for m, s in raw.zrange(k(queue, "pending"), 0, -1, withscores=True)] \
        == sorted(((j, float(p)) for j, p in zip(minted, pris, strict=True)),
                  key=lambda t: (t[1], t[0]))
    got = [run(jobs.claim, queue, 60_000).id for _ in range(6)]
    assert got == [minted[1], minted[5], minted[4], minted[0], minted[2], minted[3]]
    # the row keeps a non-zero priority only
    assert row(raw, queue, minted[0])[b"priority"] == b"5"
    assert b"priority" not in row(raw, queue, minted[1])


@pytest.mark.parametrize("bad", [-1, 1_000_001, 1.5, True, "3"])
def test_priority_guard_writes_nothing(run, queue, snap, bad):
    exc = ValueError if isinstance(bad, int) and not isinstance(bad, bool) else TypeError
    for call in (
        lambda: run(jobs.enqueue, queue, ids.mint(), b"x", priority=bad),
        lambda: run(jobs.enqueue_in, queue, ids.mint(), b"x", 10, priority=bad),
        lambda: run(jobs.enqueue_at, queue, ids.mint(), b"x", 10, priority=bad),
        lambda: run(jobs.enqueue_many, queue, [(ids.mint(), b"x", {"priority": bad})]),
        lambda: run(jobs.schedule_many, queue, [(ids.mint(), b"x", "in", 5, {"priority": bad})]),
    ):
        with pytest.raises(exc):
            call()
    assert snap(queue) == {}


@pytest.mark.parametrize(("bad", "exc"), [("", ValueError), ("a{b", ValueError),
                                          ("g" * 201, ValueError), (5, TypeError)])
def test_group_guard_writes_nothing(run, queue, snap, bad, exc):
    with pytest.raises(exc):
        run(jobs.enqueue, queue, ids.mint(), b"x", group=bad)
    with pytest.raises(exc):
        run(jobs.enqueue_at, queue, ids.mint(), b"x", 0, group=bad)
    with pytest.raises(exc):
        run(jobs.enqueue_many, queue, [(ids.mint(), b"x", {"group": bad})])
    assert snap(queue) == {}


def test_bulk_options_refuse_unknown_keys(run, queue, snap):
    with pytest.raises(TypeError):
        run(jobs.enqueue_many, queue, [(ids.mint(), b"x", {"prio": 1})])
    with pytest.raises(TypeError):
        run(jobs.enqueue_many, queue, [(ids.mint(), b"x", {}, {})])
    assert snap(queue) == {}


@pytest.mark.topologies
def test_group_admission_waits_on_the_lane(run, raw, queue):
    a, b = ids.mint(), ids.mint()
    assert run(jobs.enqueue, queue, a, b"x", group="acme", priority=4) == "enqueued"
    assert run(jobs.enqueue, queue, b, b"y", group="acme") == "enqueued"
    assert row(raw, queue, a) == {b"state": b"pending", b"attempts": b"0", b"payload": b"x",
                                  b"group": b"acme", b"priority": b"4"}
    assert raw.zrange(keyspace.lane_key(queue, "acme"), 0, -1, withscores=True) == [
        (b.encode(), 0.0), (a.encode(), 4.0)
    ]
    assert not raw.exists(k(queue, "pending"))
    assert run(jobs.enqueue, queue, a, b"x", group="acme") == "duplicate"


def test_scheduled_priority_survives_promote_on_both_wires(run, raw, queue):
    now = server_ms(raw)
    hi, lo, plain = ids.mint(), ids.mint(), ids.mint()
    assert run(jobs.enqueue_at, queue, hi, b"x", now - 5, priority=9) == "scheduled"
    assert run(jobs.enqueue_in, queue, lo, b"x", 0, priority=2) == "scheduled"
    run(jobs.enqueue_at, queue, plain, b"x", now - 5)
    assert row(raw, queue, hi)[b"priority"] == b"9"
    assert row(raw, queue, hi)[b"state"] == b"scheduled"
    assert run(jobs.promote, queue, 10) == 3  # EMQ.PROMOTE at wire 6: flat rows only
    assert raw.zrange(k(queue, "pending"), 0, -1, withscores=True) == [
        (plain.encode(), 0.0), (lo.encode(), 2.0), (hi.encode(), 9.0)
    ]


@pytest.mark.topologies
def test_grouped_schedule_promotes_to_its_lane(run, raw, queue):
    jid = ids.mint()
    assert run(jobs.enqueue_at, queue, jid, b"x", 0, group="g1", priority=3) == "scheduled"
    assert run(jobs.promote, queue, 10, native=False) == 1
    assert raw.zrange(keyspace.lane_key(queue, "g1"), 0, -1, withscores=True) == [
        (jid.encode(), 3.0)
    ]


def _cycle(run, raw, queue, jid):
    """Claim ``jid`` (it must be the head) and return its token."""
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid
    return c.token


@pytest.mark.topologies
def test_every_readmission_keeps_the_priority(run, raw, queue):
    jid, other = ids.mint(), ids.mint()
    run(jobs.enqueue, queue, jid, b"x", priority=7)
    # retry -> schedule -> promote
    tok = _cycle(run, raw, queue, jid)
    run(jobs.enqueue, queue, other, b"y", priority=8)
    assert run(jobs.retry, queue, jid, tok, 0, 5, "e") == "retrying"
    run(jobs.promote, queue, 10)
    assert raw.zscore(k(queue, "pending"), jid) == 7.0
    # delay -> schedule -> promote
    tok = _cycle(run, raw, queue, jid)
    run(jobs.delay, queue, jid, tok, 0)
    run(jobs.promote, queue, 10)
    assert raw.zscore(k(queue, "pending"), jid) == 7.0
    # reap
    tok = _cycle(run, raw, queue, jid)
    raw.zadd(k(queue, "active"), {jid: 1})
    assert run(jobs.reap, queue, 10) == 1
    assert raw.zscore(k(queue, "pending"), jid) == 7.0
    # revive
    tok = _cycle(run, raw, queue, jid)
    assert run(jobs.retry, queue, jid, tok, 0, 1, "e") == "dead"
    run(dead.revive, queue, jid)
    assert raw.zscore(k(queue, "pending"), jid) == 7.0
    assert raw.zscore(k(queue, "pending"), other) == 8.0
    assert row(raw, queue, jid)[b"priority"] == b"7"


def test_bulk_verbs_carry_options_per_item(run, raw, queue):
    a, b, c, d = (ids.mint() for _ in range(4))
    run(jobs.enqueue, queue, d, b"old")
    out = run(jobs.enqueue_many, queue, [
        (a, b"1", {"priority": 3}), (b, b"2"), (c, b"3", {"group": "t1"}), (d, b"4", {}),
    ])
    assert out == ["enqueued", "enqueued", "enqueued", "duplicate"]
    assert raw.zscore(k(queue, "pending"), a) == 3.0
    assert raw.zscore(k(queue, "pending"), b) == 0.0
    assert raw.zscore(keyspace.lane_key(queue, "t1"), c) == 0.0
    assert row(raw, queue, c)[b"group"] == b"t1"
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]
    e, f = ids.mint(), ids.mint()
    out = run(jobs.schedule_many, queue, [
        (e, b"5", "at", 77, {"priority": 2, "group": "t2"}), (f, b"6", "in", 0), (a, b"", "at", 1),
    ])
    assert out == ["scheduled", "scheduled", "duplicate"]
    assert raw.zscore(k(queue, "schedule"), e) == 77.0
    assert row(raw, queue, e) == {b"state": b"scheduled", b"attempts": b"0", b"payload": b"5",
                                  b"priority": b"2", b"group": b"t2"}
    with pytest.raises(errors.KindError):
        run(jobs.enqueue_many, queue, [("BAD", b"x", {"priority": 1})])


def test_admit_many_script_checks_every_id_first(raw, queue, snap):
    from echomq import scripts

    with pytest.raises(Exception, match="EMQKIND job id must be JOB-namespaced"):
        raw.eval(scripts.source("admit_many"), 2, k(queue, "pending"), k(queue, "schedule"),
                 keyspace.base(queue), ids.mint(), "a", "now", "0", "1", "",
                 "BAD", "b", "now", "0", "", "")
    assert snap(queue) == {}
