"""Flow nodes with unique keys and delays, on a real Valkey (single server and a 3-primary
cluster): a node whose key a live job owns is linked to that job (its end counts for the
parent), a delayed leaf waits on the schedule, a delayed parent is released no earlier than
its run-at."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from echomq.core import ids, keyspace
from echomq.dashboard import insight
from echomq.verbs import dead, flows, jobs
from echomq.verbs.flows import Node
from tests.support.flows import leaf, state

pytestmark = pytest.mark.topologies


def qname() -> str:
    return "fu-" + uuid.uuid4().hex[:8]




def carry(conn: Any, *queues: str) -> flows.Carried:
    total = flows.Carried()
    for q in queues:
        total = total.plus(flows.carry(conn, q))
    return total


def claim_one(conn: Any, queue: str, jid: str) -> jobs.Claim:
    c = jobs.claim(conn, queue, 60_000)
    assert c is not None and c.id == jid, c
    return c


def owner_job(conn: Any, queue: str, key: str, **kw: Any) -> str:
    jid = ids.mint()
    got = jobs.admit(conn, queue, jid, b'{"owner":1}', unique=key, **kw)
    assert got.outcome in ("enqueued", "scheduled") and got.id == jid
    return jid


def test_a_node_whose_key_a_live_job_owns_waits_for_that_job(conn, raw):
    pq, cq = qname(), qname()
    owner = owner_job(conn, cq, "tenant-7")
    mine, other = leaf(cq, unique="tenant-7"), leaf(cq)
    root = Node(pq, ids.mint(), b"p", children=(mine, other))
    out = flows.admit(conn, root)
    assert out[mine.id] == "linked" and out.links == {mine.id: owner}
    assert out[other.id] == "enqueued" and out[root.id] == "waiting"
    assert state(raw, cq, mine.id) == "linked"
    assert raw.hget(keyspace.job_key(cq, mine.id), "linked") == owner.encode()
    # nothing new to run for the linked node: only the owner and the plain child
    assert raw.zcard(keyspace.queue_key(cq, "pending")) == 2
    c = claim_one(conn, cq, owner)
    jobs.ack(conn, cq, owner, c.token, keep=False, result=b'{"rows":3}',
             keep_result_ms=60_000)
    assert carry(conn, cq).counted == 1  # the owner's end, delivered as the node's
    assert state(raw, pq, root.id) == "waiting-children"  # the plain child still runs
    c = claim_one(conn, cq, other.id)
    jobs.ack(conn, cq, other.id, c.token, keep=False)
    assert carry(conn, cq).released == 1
    assert state(raw, pq, root.id) == "pending"
    kids = {k.id: k for k in flows.children(conn, pq, root.id)}
    assert kids[mine.id].state == "completed" and kids[mine.id].value == {"rows": 3}
    assert state(raw, cq, mine.id) is None  # the stub left with its owner
    assert not raw.exists(keyspace.queue_key(cq, f"watch:{owner}"))


def test_a_linked_node_fails_its_parent_with_the_owner_and_a_revive_goes_on(conn, raw):
    pq, cq = qname(), qname()
    owner = owner_job(conn, cq, "k")
    mine = leaf(cq, unique="k")
    root = Node(pq, ids.mint(), b"p", children=(mine,))
    flows.admit(conn, root)
    c = claim_one(conn, cq, owner)
    jobs.retry(conn, cq, owner, c.token, 0, 1, "disk full")
    assert carry(conn, cq).failed == 1
    row = raw.hmget(keyspace.job_key(pq, root.id), "state", "error")
    assert row[0] == b"dead"
    assert f"child {mine.id} died".encode() in row[1] and owner.encode() in row[1]
    assert b"disk full" in row[1]
    dead.revive(conn, cq, owner)
    c = claim_one(conn, cq, owner)
    jobs.ack(conn, cq, owner, c.token, keep=False)
    got = carry(conn, cq)
    assert (got.counted, got.released) == (1, 1)
    assert state(raw, pq, root.id) == "pending"


def test_a_linked_parent_admits_no_children_and_a_linked_root_nothing(conn, raw):
    rq, mq, lq = qname(), qname(), qname()
    owner = owner_job(conn, mq, "report")
    kids = tuple(leaf(lq) for _ in range(3))
    mid = Node(mq, ids.mint(), b"m", children=kids, unique="report")
    root = Node(rq, ids.mint(), b"r", children=(mid, leaf(mq)))
    out = flows.admit(conn, root)
    assert out[mid.id] == "linked" and out.links[mid.id] == owner
    assert all(k.id not in out for k in kids)
    assert all(state(raw, lq, k.id) is None for k in kids)
    assert not raw.exists(keyspace.queue_key(mq, f"deps:{mid.id}"))
    # a root whose key is owned writes nothing at all and names the owner
    again = Node(mq, ids.mint(), b"m", children=(leaf(lq),), unique="report")
    out = flows.admit(conn, again)
    assert out[again.id] == "linked" and out.links == {again.id: owner}
    assert len(out) == 1 and state(raw, mq, again.id) is None
    assert not raw.zscore(keyspace.queue_key(mq, "flows:open"), again.id)


def test_a_flow_node_owns_its_key_against_later_enqueues(conn, raw):
    pq, cq = qname(), qname()
    node = leaf(cq, unique="once")
    root = Node(pq, ids.mint(), b"p", children=(node,), unique="batch-1")
    flows.admit(conn, root)
    got = jobs.admit(conn, cq, ids.mint(), b"x", unique="once")
    assert (got.outcome, got.id) == ("duplicate", node.id)
    # a parent waiting for its children owns its key too
    got = jobs.admit(conn, pq, ids.mint(), b"x", unique="batch-1")
    assert (got.outcome, got.id) == ("duplicate", root.id)
    c = claim_one(conn, cq, node.id)
    jobs.ack(conn, cq, node.id, c.token, keep=False)
    assert not raw.exists(keyspace.queue_key(cq, "unique:once"))  # released by its end
    carry(conn, cq)
    c = claim_one(conn, pq, root.id)
    jobs.ack(conn, pq, root.id, c.token, keep=False)
    assert not raw.exists(keyspace.queue_key(pq, "unique:batch-1"))


def test_a_node_linked_to_an_ended_owner_settles_at_once(conn, raw):
    pq, cq = qname(), qname()
    owner = owner_job(conn, cq, "window", unique_for_ms=60_000)
    c = claim_one(conn, cq, owner)
    jobs.ack(conn, cq, owner, c.token, keep=False, result=b"42", keep_result_ms=60_000)
    mine = leaf(cq, unique="window")  # the key holds for its window: linked, not run
    root = Node(pq, ids.mint(), b"p", children=(mine,))
    out = flows.admit(conn, root)
    assert out[mine.id] == "linked"
    assert carry(conn, cq).released == 1
    assert [k.value for k in flows.children(conn, pq, root.id)] == [42]
    assert state(raw, cq, mine.id) is None


def test_cancel_of_a_parent_leaves_the_linked_owner_running(conn, raw):
    pq, cq = qname(), qname()
    owner = owner_job(conn, cq, "shared")
    root = Node(pq, ids.mint(), b"p", children=(leaf(cq, unique="shared"), leaf(cq)))
    flows.admit(conn, root)
    assert flows.cancel(conn, pq, root.id) == "cancelled"
    assert state(raw, cq, owner) == "pending"  # someone else's job: not ours to cancel
    c = claim_one(conn, cq, owner)
    jobs.ack(conn, cq, owner, c.token, keep=False)
    carry(conn, cq)
    assert state(raw, pq, root.id) == "cancelled"


def test_discard_of_a_watched_owner_settles_its_linked_nodes(conn, raw):
    pq, cq = qname(), qname()
    owner = owner_job(conn, cq, "gone", mode="in", value=60_000)
    mine = Node(cq, ids.mint(), b"n", unique="gone", policy="ignore")
    root = Node(pq, ids.mint(), b"p", children=(mine,))
    flows.admit(conn, root)
    assert insight.discard(conn, cq, owner) is True
    assert carry(conn, cq).released == 1  # 'ignore': the parent runs without it
    assert [k.state for k in flows.children(conn, pq, root.id)] == ["cancelled"]


def test_a_delayed_leaf_waits_and_a_delayed_parent_is_released_no_earlier(conn, raw):
    pq, cq = qname(), qname()
    late = leaf(cq, mode="in", value=60_000)
    now_kid = leaf(cq)
    at = int(time.time() * 1000) + 400
    root = Node(pq, ids.mint(), b"p", children=(now_kid,), mode="at", value=at)
    out = flows.admit(conn, Node(pq, ids.mint(), b"q", children=(late,)))
    assert out[late.id] == "scheduled" and state(raw, cq, late.id) == "scheduled"
    flows.admit(conn, root)
    c = claim_one(conn, cq, now_kid.id)
    jobs.ack(conn, cq, now_kid.id, c.token, keep=False)
    assert carry(conn, cq).released == 1
    assert state(raw, pq, root.id) == "scheduled"  # its run-at is still ahead
    assert raw.zscore(keyspace.queue_key(pq, "schedule"), root.id) == at
    assert jobs.claim(conn, pq, 60_000) is None
    time.sleep(max(0.0, (at - time.time() * 1000) / 1000) + 0.05)
    assert jobs.promote(conn, pq, 10) == 1
    assert claim_one(conn, pq, root.id)


def test_echomq_job_shows_a_linked_node_and_its_owner(server):
    from echomq import Connector
    from tests.support.cli import echomq

    conn = Connector.connect(server.url)
    pq, cq = qname(), qname()
    owner = owner_job(conn, cq, "shown")
    mine = leaf(cq, unique="shown")
    flows.admit(conn, Node(pq, ids.mint(), b"p", children=(mine,)))
    conn.close()
    got = echomq("job", mine.id, "--queue", cq, url=server.url)
    assert got.returncode == 0, got.stderr
    assert "linked" in got.stdout and f"linked    {owner}" in got.stdout
    assert "parent    " in got.stdout and "Traceback" not in got.stderr
