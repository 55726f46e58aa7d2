"""Batch members that end with no worker to tell (dead-lettered by the reaper, expired by
the deadline sweep, cancelled while waiting or scheduled): the script that ends each
writes its end to its queue's flow outbox (includes/member.lua), the flow carrier settles
it on the batch's slot; the counts are exact and each callback is enqueued once, however
often the end is delivered."""

from __future__ import annotations

import json
import time

import pytest

from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import batches, flows, jobs
from echomq.verbs.batches import BatchInfo, Callback


def _member(batch_id: str, n: int) -> bytes:
    """A member's payload, marked as admission marks it (``tasks.batches``)."""
    return encode("member", [n])[:-1] + b',"batch":' + json.dumps(batch_id).encode() + b"}"


def _batch(conn, queue: str, count: int) -> tuple[str, list[str]]:
    """An open batch with callbacks on ``queue``-cb and ``count`` enrolled member ids."""
    bid = ids.mint()
    cbs = {k: Callback(queue + "-cb", f"cb_{k}") for k in batches.KINDS}
    assert batches.create(conn, bid, cbs)
    members = [ids.mint() for _ in range(count)]
    batches.enroll(conn, bid, members)
    return bid, members


def _callbacks(conn, queue: str, bid: str) -> list[str]:
    """The callback jobs enqueued for ``bid`` (their ids name their kind)."""
    got = []
    for kind in batches.KINDS:
        row = jobs.get(conn, queue + "-cb", f"{bid}.{kind}")
        if row is not None:
            got.append(kind)
    return got


def _carry_twice(conn, raw, queue: str) -> flows.Carried:
    """Carry the outbox, then deliver its member entries again (a carrier that died after
    the settle, before its XDEL): the second delivery counts nothing."""
    outbox = keyspace.queue_key(queue, "flow:outbox")
    entries = raw.xrange(outbox)
    got = flows.carry(conn, queue)
    before = batches.info(conn, entries[0][1][b"batch"].decode()) if entries else None
    for _, fields in entries:
        raw.xadd(outbox, fields)
    again = flows.carry(conn, queue)
    assert again.members == got.members
    assert raw.xlen(outbox) == 0
    if before is not None:  # the repeat changed nothing
        assert batches.info(conn, entries[0][1][b"batch"].decode()) == before
    return got


@pytest.mark.topologies  # on a cluster too: the member's queue, the batch and the callbacks
def test_a_member_dead_by_the_reaper_settles_its_batch(conn, raw, queue):
    bid, (dead, done) = _batch(conn, queue, 2)
    jobs.enqueue(conn, queue, dead, _member(bid, 1))
    jobs.enqueue(conn, queue, done, _member(bid, 2))
    batches.close(conn, bid)
    claimed = {c.id: c for c in jobs.claim_many(conn, queue, 1, 2)}
    jobs.ack(conn, queue, done, claimed[done].token)
    batches.settle(conn, bid, [(done, "completed")])  # the worker's own notice
    time.sleep(0.01)  # the 1 ms lease lapses
    assert jobs.reap(conn, queue, 10, max_stalled=0) == 1
    assert jobs.get(conn, queue, dead)["state"] == "dead"
    assert _carry_twice(conn, raw, queue).members == 1
    assert batches.info(conn, bid) == BatchInfo(2, 0, 1, 1, True)
    assert _callbacks(conn, queue, bid) == ["complete", "death"]
    assert batches.fired(conn, bid) == ["complete", "death"]


def test_a_member_expired_by_the_sweep_settles_its_batch(conn, raw, queue):
    bid, (late,) = _batch(conn, queue, 1)
    jobs.admit(conn, queue, late, _member(bid, 1), expires_ms=1)
    batches.close(conn, bid)
    time.sleep(0.01)
    assert jobs.expire(conn, queue, 10) == 1
    assert _carry_twice(conn, raw, queue).members == 1
    # an expired member counts with the cancelled ones: ended, neither completed nor dead
    assert batches.info(conn, bid) == BatchInfo(1, 0, 0, 0, True)
    assert _callbacks(conn, queue, bid) == ["complete"]


@pytest.mark.parametrize("where", ["pending", "scheduled"])
def test_a_member_cancelled_while_waiting_settles_its_batch(conn, raw, queue, where):
    bid, (waiting, other) = _batch(conn, queue, 2)
    if where == "pending":
        jobs.enqueue(conn, queue, waiting, _member(bid, 1))
    else:
        jobs.admit(conn, queue, waiting, _member(bid, 1), mode="in", value=60_000)
    jobs.enqueue(conn, queue, other, _member(bid, 2))
    batches.close(conn, bid)
    assert jobs.cancel(conn, queue, waiting) == "cancelled"
    assert _carry_twice(conn, raw, queue).members == 1
    assert batches.info(conn, bid) == BatchInfo(2, 1, 0, 0, True)
    assert _callbacks(conn, queue, bid) == []  # one member still pending
    jobs.cancel(conn, queue, other)
    flows.carry(conn, queue)
    assert batches.info(conn, bid) == BatchInfo(2, 0, 0, 0, True)
    assert _callbacks(conn, queue, bid) == ["complete"]  # never success: none completed


def test_a_plain_job_and_a_completed_member_write_no_outbox_entry(conn, queue):
    bid, (member,) = _batch(conn, queue, 1)
    plain = ids.mint()
    jobs.enqueue(conn, queue, plain, encode("plain", [1]))
    jobs.enqueue(conn, queue, member, _member(bid, 1))
    jobs.cancel(conn, queue, plain)
    c = jobs.claim_many(conn, queue, 60_000, 1)
    assert [x.id for x in c] == [member]
    jobs.ack(conn, queue, member, c[0].token)
    assert flows.outbox_size(conn, queue) == 0


def test_one_notice_of_many_members_and_outcomes_counts_each_once(conn, queue):
    bid, members = _batch(conn, queue, 12_000)
    batches.close(conn, bid)
    done, dead = members[:11_000], members[11_000:]
    ends = [(m, "completed") for m in done] + [(m, "dead") for m in dead]
    ends += [(done[0], "completed"), (dead[0], "completed")]  # repeats count nothing
    got = batches.settle(conn, bid, ends[:6_000])
    assert got == BatchInfo(12_000, 6_000, 6_000, 0, True)
    got = batches.settle(conn, bid, ends)
    assert got == BatchInfo(12_000, 0, 11_000, 1_000, True)
    assert _callbacks(conn, queue, bid) == ["complete", "death"]
