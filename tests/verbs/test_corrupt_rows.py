"""A row the queue cannot run ends dead with the reason, never dropped.

A claim pops ids off pending and the lanes; whatever it popped and cannot hand out (no row,
a row without its payload, a row that is not a hash, an unknown state, attempts that are
no number) ends on the dead set with ``error = "corrupt row: <why>"``, counted on the
queue's stats (``corrupt`` and ``dead``), and the claim carries on with the next job.
Rows written by another client (or by a bug) are the fixtures here.
"""

from __future__ import annotations

import pytest

from echomq import ids, keyspace
from echomq.core import states
from echomq.scripts import source
from echomq.verbs import dead, groups, jobs


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def planted(raw, queue: str, fields: dict[str, str] | None, *, lane: str | None = None) -> str:
    """An id on pending (or a lane) whose row holds ``fields`` (``None``: no row)."""
    jid = ids.mint()
    if fields:
        raw.hset(keyspace.job_key(queue, jid), mapping=fields)
    raw.zadd(keyspace.lane_key(queue, lane) if lane else k(queue, "pending"), {jid: 0})
    return jid


def buried(raw, queue: str, jid: str) -> str:
    """The reason ``jid`` ended dead (it must be dead, on the dead set)."""
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"dead", row
    assert raw.zscore(k(queue, "dead"), jid) is not None
    assert row[b"died_at"]
    return row[b"error"].decode()


CASES = [
    ("no payload", {"state": "pending", "attempts": "0"}, "corrupt row: no payload"),
    ("no row", None, "corrupt row: no row"),
    ("unknown state", {"state": "bogus", "attempts": "0", "payload": "x"},
     "corrupt row: unknown state 'bogus'"),
    ("no state", {"attempts": "0", "payload": "x"}, "corrupt row: no state"),
    ("attempts not a number", {"state": "pending", "attempts": "many", "payload": "x"},
     "corrupt row: attempts 'many' is not a number"),
    ("stub on pending", {"state": "linked", "payload": "x"},
     "corrupt row: state 'linked' on pending"),
]


@pytest.mark.parametrize(("why", "fields", "reason"), CASES, ids=[c[0] for c in CASES])
def test_claim_buries_a_row_it_cannot_run_and_claims_the_next(run, raw, queue, why, fields,
                                                              reason):
    bad = planted(raw, queue, fields)
    good = ids.mint()
    run(jobs.enqueue, queue, good, b"payload")
    got = run(jobs.claim, queue, 1000)
    assert got is not None and got.id == good and got.payload == b"payload"
    assert buried(raw, queue, bad) == reason
    stats = run(jobs.stats, queue)
    assert stats["corrupt"] == 1 and stats["dead"] == 1
    assert not raw.zscore(k(queue, "active"), bad)
    assert run(jobs.counts, queue)["dead"] == 1


def test_claim_moves_a_row_that_is_not_a_hash_aside(run, raw, queue):
    jid = ids.mint()
    raw.set(keyspace.job_key(queue, jid), "a string, not a row")
    raw.zadd(k(queue, "pending"), {jid: 0})
    assert run(jobs.claim, queue, 1000) is None  # no raise: the claim goes on
    assert buried(raw, queue, jid) == (
        f"corrupt row: a string, not a hash (kept at {k(queue, 'corrupt:' + jid)})")
    assert raw.get(k(queue, "corrupt:" + jid)) == b"a string, not a row"


def test_claim_many_returns_every_good_job_around_the_bad_ones(run, raw, queue):
    # mint order is claim order: two good, three bad, two good
    good = [ids.mint() for _ in range(2)]
    bad = [planted(raw, queue, {"state": "pending"}) for _ in range(3)]
    good += [ids.mint() for _ in range(2)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in good])
    got = run(jobs.claim_many, queue, 1000, 4)
    assert [c.id for c in got] == good
    assert all(buried(raw, queue, b) == "corrupt row: no payload" for b in bad)
    assert run(jobs.stats, queue)["corrupt"] == 3


def test_a_corrupt_row_on_a_lane_ends_dead_and_the_group_keeps_its_count(run, raw, queue):
    good = ids.mint()
    run(jobs.enqueue, queue, good, b"x", group="acme")
    bad = planted(raw, queue, {"state": "pending", "group": "acme"}, lane="acme")
    # the lane's order is mint order: the planted id is newer, the good one comes first
    first = run(jobs.claim, queue, 1000)
    assert first.id == good
    assert run(jobs.claim, queue, 1000) is None
    assert buried(raw, queue, bad) == "corrupt row: no payload"
    assert run(groups.stats, queue)["acme"].active == 1  # the good job only


def test_a_stray_entry_of_a_job_living_elsewhere_is_left_to_its_set(run, raw, queue):
    # a scheduled job whose id another client also put on pending: the claim leaves the
    # row where its state says (not dead, not run); nothing is lost
    jid = ids.mint()
    run(jobs.enqueue_in, queue, jid, b"x", 60_000)
    raw.zadd(k(queue, "pending"), {jid: 0})
    assert run(jobs.claim, queue, 1000) is None
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"scheduled"
    assert raw.zscore(k(queue, "schedule"), jid) is not None
    assert run(jobs.stats, queue).get("corrupt", 0) == 0


def test_a_known_state_away_from_its_set_ends_dead(run, raw, queue):
    jid = planted(raw, queue, {"state": "scheduled", "attempts": "0", "payload": "x"})
    assert run(jobs.claim, queue, 1000) is None
    assert buried(raw, queue, jid) == "corrupt row: state 'scheduled' on pending"


def test_the_dead_list_shows_the_reason(run, raw, queue):
    jid = planted(raw, queue, {"state": "pending", "attempts": "0"})
    run(jobs.claim, queue, 1000)
    [entry] = run(dead.list_dead, queue)
    assert entry["id"] == jid and entry["error"] == "corrupt row: no payload"


def test_the_scripts_know_every_state():
    # the claim's table of states and their sets (includes/states.lua) follows core.states
    text = source("claim")
    for state, set_name in states.SET_OF.items():
        assert f"['{state}'] = '{set_name}'" in text, state
