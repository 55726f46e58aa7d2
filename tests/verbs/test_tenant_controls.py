"""Tenant controls on the wire: the queue-wide cap (jobs.set_limit, declare_limit), the
group defaults (groups.set_defaults) and the refusal of a pattern as a group name; both
wires (at wire 6 EMQ.CLAIM hands a capped queue back to the script)."""

from __future__ import annotations

import pytest

from echomq.core import ids, keyspace
from echomq.verbs import groups, jobs
from echomq.verbs.groups import GroupDefaults


def test_the_queue_cap_bounds_live_leases_across_claims(run, queue):
    for _ in range(5):
        run(jobs.enqueue, queue, ids.mint(), b"x")
    run(jobs.set_limit, queue, 2)
    assert run(jobs.queue_limit, queue) == 2
    got = run(jobs.claim_many, queue, 60_000, 5)
    assert len(got) == 2
    assert run(jobs.claim, queue, 60_000) is None  # another worker: still at the cap
    run(jobs.ack, queue, got[0].id, got[0].token)
    assert len(run(jobs.claim_many, queue, 60_000, 5)) == 1  # one slot freed
    run(jobs.set_limit, queue, None)
    assert run(jobs.queue_limit, queue) is None
    assert len(run(jobs.claim_many, queue, 60_000, 5)) == 2


def test_a_lapsed_lease_frees_its_slot_before_the_reaper(run, raw, queue):
    run(jobs.enqueue, queue, ids.mint(), b"x")
    run(jobs.enqueue, queue, ids.mint(), b"y")
    run(jobs.set_limit, queue, 1)
    first = run(jobs.claim, queue, 60_000)
    assert run(jobs.claim, queue, 60_000) is None
    raw.zadd(keyspace.queue_key(queue, "active"), {first.id: 1})  # its lease lapsed
    assert run(jobs.claim, queue, 60_000) is not None


def test_why_names_the_queue_cap(run, queue):
    run(jobs.enqueue, queue, ids.mint(), b"x")
    waiting = ids.mint()
    run(jobs.enqueue, queue, waiting, b"y")
    run(jobs.set_limit, queue, 1)
    run(jobs.claim, queue, 60_000)
    hold = run(jobs.why, queue, waiting)
    assert hold.control == "limit"
    assert hold.words == "queue at its limit (1 of 1 running)"


def test_declare_limit_keeps_an_operators_cap(run, queue):
    assert run(jobs.declare_limit, queue, 3) == ("applied", "3")
    assert run(jobs.declare_limit, queue, 3) == ("same", "3")
    run(jobs.set_limit, queue, 7)  # the operator
    assert run(jobs.declare_limit, queue, 3) == ("kept", "7")
    run(jobs.set_limit, queue, None)
    assert run(jobs.declare_limit, queue, 3) == ("applied", "3")
    assert run(jobs.declare_limit, queue, None) == ("cleared", "")
    assert run(jobs.queue_limit, queue) is None


def test_group_defaults_limit_every_group_without_its_own(run, queue):
    run(groups.set_defaults, queue, 1)
    for g in ("t1", "t2"):
        for _ in range(3):
            run(jobs.enqueue, queue, ids.mint(), b"x", group=g)
    run(groups.set_limit, queue, "t2", 2)  # the operator's setting wins for t2
    got = run(jobs.claim_many, queue, 60_000, 10)
    stats = run(groups.stats, queue)
    assert len(got) == 3
    assert (stats["t1"].active, stats["t2"].active) == (1, 2)
    assert run(groups.defaults, queue) == GroupDefaults(1, None, None)
    run(groups.set_defaults, queue, None)  # lifting the default frees t1 at once
    assert len(run(jobs.claim_many, queue, 60_000, 10)) == 2
    assert run(groups.stats, queue)["t1"].active == 3


def test_group_defaults_rate_applies_per_group(run, queue):
    run(groups.set_defaults, queue, rate=(1, 60_000))
    for g in ("a", "b"):
        for _ in range(2):
            run(jobs.enqueue, queue, ids.mint(), b"x", group=g)
    got = run(jobs.claim_many, queue, 60_000, 10)
    assert len(got) == 2  # one start per group per minute
    assert run(groups.defaults, queue) == GroupDefaults(None, 1, 60_000)


@pytest.mark.parametrize("name", ["tenant-*", "*"])
def test_a_pattern_is_refused_with_a_pointer_to_the_defaults(run, queue, name):
    with pytest.raises(ValueError, match="set_defaults"):
        run(groups.set_rate, queue, name, 10, 1000)
    with pytest.raises(ValueError, match="group_limit"):
        run(groups.set_limit, queue, name, 2)


def test_weights_3_to_1_share_the_ring_within_ten_percent(run, queue):
    for g in ("heavy", "light"):
        for _ in range(700):
            run(jobs.enqueue, queue, ids.mint(), b"x", group=g)
    run(groups.set_weight, queue, "heavy", 3)
    assert run(groups.stats, queue)["heavy"].weight == 3
    got: list[str] = []
    for _ in range(10):  # 1,000 claims, 100 per call
        got += [c.id for c in run(jobs.claim_many, queue, 60_000, 100)]
    assert len(got) == 1000
    stats = run(groups.stats, queue)
    heavy = stats["heavy"].active
    assert heavy + stats["light"].active == 1000
    assert abs(heavy / 1000 - 0.75) <= 0.075  # within 10% of its 3/4 share
    run(groups.set_weight, queue, "heavy", 1)
    assert run(groups.stats, queue)["heavy"].weight == 1
