"""Flows on a real Valkey (single server and a 3-primary cluster): admission, the two-half
settlement (outbox on the child's slot, carry on the parent's), exactly-once counting,
release, failure policies, cancel of a subtree, revive."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import valkey

from echomq.core import errors, ids, keyspace
from echomq.verbs import flows, jobs
from echomq.verbs.flows import Node
from tests.support.flows import leaf, state

pytestmark = pytest.mark.topologies


def qname() -> str:
    return "fl-" + uuid.uuid4().hex[:8]




def run_all(conn: Any, queue: str, *, fail: set[str] = frozenset(), max_attempts: int = 1,
            result: bool = False) -> list[str]:
    """Claim and settle everything claimable in ``queue`` now: ack, or fail (retry with
    ``max_attempts``) the ids in ``fail``. The ids run, in order."""
    ran = []
    while (c := jobs.claim(conn, queue, 60_000)) is not None:
        ran.append(c.id)
        if c.id in fail:
            jobs.retry(conn, queue, c.id, c.token, 0, max_attempts, "boom")
        else:
            jobs.ack(conn, queue, c.id, c.token)
    return ran


def carry_all(conn: Any, queues: list[str]) -> flows.Carried:
    total = flows.Carried()
    while True:
        got = flows.Carried()
        for q in queues:
            got = got.plus(flows.carry(conn, q))
        total = total.plus(got)
        if got.read == 0:
            return total


def test_a_parent_waits_for_every_child_then_is_released(conn, raw):
    pq, cq = qname(), qname()
    kids = tuple(leaf(cq) for _ in range(5))
    root = Node(pq, ids.mint(), b"parent", children=kids, priority=7)
    out = flows.admit(conn, root)
    assert out[root.id] == "waiting" and all(out[k.id] == "enqueued" for k in kids)
    assert state(raw, pq, root.id) == "waiting-children"
    assert jobs.claim(conn, pq, 60_000) is None  # never claimable while it waits
    ran = run_all(conn, cq)
    assert sorted(ran) == sorted(k.id for k in kids)
    # the first four carries leave it waiting; the fifth releases it
    assert flows.outbox_size(conn, cq) == 5
    got = flows.carry(conn, cq, batch=4)
    assert (got.read, got.counted, got.released) == (4, 4, 0)
    assert state(raw, pq, root.id) == "waiting-children"
    got = flows.carry(conn, cq)
    assert (got.read, got.counted, got.released) == (1, 1, 1)
    assert state(raw, pq, root.id) == "pending"
    assert raw.zscore(keyspace.queue_key(pq, "pending"), root.id) == 7  # at its priority
    assert flows.outbox_size(conn, cq) == 0
    seen = flows.children(conn, pq, root.id)
    assert [(c.queue, c.id, c.state) for c in seen] == [(cq, k.id, "completed") for k in kids]
    kids_key = keyspace.queue_key(pq, f"kids:{root.id}")
    assert raw.pttl(kids_key) == -1  # kept while the flow is open
    assert run_all(conn, pq) == [root.id]
    # the bookkeeping outlives the parent by a week, then goes
    assert 0 < raw.pttl(kids_key) <= 7 * 24 * 3600 * 1000


def test_a_replayed_entry_counts_once(conn, raw):
    """A Pump killed between the carry and the XDEL leaves the entry behind: carried again,
    it changes nothing (the parent is not released early nor twice)."""
    pq, cq = qname(), qname()
    kids = (leaf(cq), leaf(cq))
    root = Node(pq, ids.mint(), b"p", children=kids)
    flows.admit(conn, root)
    c = jobs.claim(conn, cq, 60_000)
    assert c is not None
    jobs.ack(conn, cq, c.id, c.token)
    outbox = keyspace.queue_key(cq, "flow:outbox")
    entries = raw.xrange(outbox)
    assert len(entries) == 1
    assert flows.carry(conn, cq).counted == 1
    # put the same entry back, as if the XDEL had never run
    raw.xadd(outbox, entries[0][1])
    again = flows.carry(conn, cq)
    assert (again.read, again.counted, again.stale) == (1, 0, 1)
    assert state(raw, pq, root.id) == "waiting-children"
    assert raw.scard(keyspace.queue_key(pq, f"deps:{root.id}")) == 1


def test_depth_three_across_three_queues(conn, raw):
    qs = [qname() for _ in range(3)]
    mids = tuple(Node(qs[1], ids.mint(), b"mid", children=tuple(leaf(qs[2]) for _ in range(4)))
                 for _ in range(3))
    root = Node(qs[0], ids.mint(), b"root", children=mids)
    flows.admit(conn, root)
    assert run_all(conn, qs[0]) == [] and run_all(conn, qs[1]) == []
    assert len(run_all(conn, qs[2])) == 12
    assert carry_all(conn, qs).released == 3
    assert state(raw, qs[0], root.id) == "waiting-children"
    assert sorted(run_all(conn, qs[1])) == sorted(m.id for m in mids)
    assert carry_all(conn, qs).released == 1
    assert run_all(conn, qs[0]) == [root.id]
    t = flows.tree(conn, qs[0], root.id)
    assert [(n.queue, n.id) for n in t.walk()] == [(n.queue, n.id) for n in root.walk()]
    assert {n.state for n in t.walk()} == {"completed"}


def test_a_dead_child_fails_the_parent_and_its_revival_lets_the_flow_go_on(conn, raw):
    pq, cq = qname(), qname()
    kids = (leaf(cq), leaf(cq))
    root = Node(pq, ids.mint(), b"p", children=kids)
    flows.admit(conn, root)
    run_all(conn, cq, fail={kids[0].id})
    got = carry_all(conn, [cq])
    assert got.failed == 1 and got.released == 0
    assert state(raw, pq, root.id) == "dead"
    err = raw.hget(keyspace.job_key(pq, root.id), "error").decode()
    assert kids[0].id in err and "boom" in err
    assert raw.zscore(keyspace.queue_key(pq, "dead"), root.id) is not None
    from echomq.verbs import dead
    dead.revive(conn, cq, kids[0].id)
    assert run_all(conn, cq) == [kids[0].id]
    got = carry_all(conn, [cq])
    assert got.released == 1
    assert state(raw, pq, root.id) == "pending"
    assert raw.zscore(keyspace.queue_key(pq, "dead"), root.id) is None
    assert [c.state for c in flows.children(conn, pq, root.id)] == ["completed", "completed"]


def test_a_late_replay_of_the_death_does_not_fail_a_revived_flow(conn, raw):
    pq, cq = qname(), qname()
    kid = leaf(cq)
    root = Node(pq, ids.mint(), b"p", children=(kid,))
    flows.admit(conn, root)
    outbox = keyspace.queue_key(cq, "flow:outbox")
    run_all(conn, cq, fail={kid.id})
    (death,) = raw.xrange(outbox)
    carry_all(conn, [cq])
    from echomq.verbs import dead
    dead.revive(conn, cq, kid.id)
    run_all(conn, cq)
    carry_all(conn, [cq])
    assert state(raw, pq, root.id) == "pending"
    raw.xadd(outbox, death[1])  # a racing Pump delivers the old death late
    assert carry_all(conn, [cq]).stale == 1
    assert state(raw, pq, root.id) == "pending"


@pytest.mark.parametrize("policy", ["ignore", "drop"])
def test_ignore_and_drop_let_the_parent_run(conn, raw, policy):
    pq, cq = qname(), qname()
    kids = (leaf(cq, policy=policy), leaf(cq))
    root = Node(pq, ids.mint(), b"p", children=kids)
    flows.admit(conn, root)
    run_all(conn, cq, fail={kids[0].id})
    assert carry_all(conn, [cq]).released == 1
    seen = {c.id: c.state for c in flows.children(conn, pq, root.id)}
    if policy == "ignore":
        assert seen == {kids[0].id: "dead", kids[1].id: "completed"}
    else:
        assert seen == {kids[1].id: "completed"}


def test_a_retried_child_counts_once(conn, raw):
    pq, cq = qname(), qname()
    kid = leaf(cq)
    root = Node(pq, ids.mint(), b"p", children=(kid, leaf(cq)))
    flows.admit(conn, root)
    retried = 0
    while retried < 3:  # three failed attempts, each retried (no outbox entry)
        c = jobs.claim(conn, cq, 60_000)
        assert c is not None
        if c.id != kid.id:
            jobs.ack(conn, cq, c.id, c.token)
            continue
        assert jobs.retry(conn, cq, kid.id, c.token, 0, 10, "flaky") == "retrying"
        retried += 1
        jobs.promote(conn, cq, 10)
    assert flows.outbox_size(conn, cq) == 0  # a retry is no settlement
    assert run_all(conn, cq) == [kid.id, root.children[1].id]
    got = carry_all(conn, [cq])
    assert (got.counted, got.released) == (2, 1)


def test_cancel_of_a_waiting_parent_cancels_its_subtree(conn, raw):
    qs = [qname() for _ in range(3)]
    mid = Node(qs[1], ids.mint(), b"mid", children=(leaf(qs[2]), leaf(qs[2])))
    root = Node(qs[0], ids.mint(), b"root", children=(mid, leaf(qs[1])))
    flows.admit(conn, root)
    assert flows.cancel(conn, qs[0], root.id) == "cancelled"
    for n in root.walk():
        assert state(raw, n.queue, n.id) == "cancelled"
    carry_all(conn, qs)
    assert state(raw, qs[0], root.id) == "cancelled"  # never released by the carries
    assert all(run_all(conn, q) == [] for q in qs)


def test_admission_is_checked_before_anything_is_written(conn, raw):
    pq, cq = qname(), qname()
    with pytest.raises(errors.KindError):
        flows.admit(conn, Node(pq, ids.mint(), b"p", children=(Node(cq, "nope", b"x"),)))
    with pytest.raises(ValueError, match="policy"):
        flows.admit(conn, Node(pq, ids.mint(), b"p", children=(leaf(cq, policy="maybe"),)))
    k = leaf(cq)
    with pytest.raises(ValueError, match="twice"):
        flows.admit(conn, Node(pq, ids.mint(), b"p", children=(k, k)))
    assert raw.exists(keyspace.queue_key(pq, "waiting-children")) == 0
    assert jobs.counts(conn, cq)["pending"] == 0


@pytest.mark.slow
def test_two_pumps_racing_release_the_parent_once(url, raw):
    from echomq import AsyncConnector

    pq, cq = qname(), qname()
    kids = tuple(leaf(cq) for _ in range(200))
    root = Node(pq, ids.mint(), b"p", children=kids)

    async def main() -> list[flows.Carried]:
        a = await AsyncConnector.connect(url)
        b = await AsyncConnector.connect(url)
        try:
            await flows.admit(a, root)
            while (c := await jobs.claim(a, cq, 60_000)) is not None:
                await jobs.ack(a, cq, c.id, c.token)

            async def pump(conn: Any) -> flows.Carried:
                total = flows.Carried()
                for _ in range(50):
                    total = total.plus(await flows.carry(conn, cq, batch=17))
                return total

            return list(await asyncio.gather(pump(a), pump(b), pump(a)))
        finally:
            await a.close()
            await b.close()

    got = asyncio.run(main())
    assert sum(g.released for g in got) == 1
    assert sum(g.counted for g in got) == 200
    assert state(raw, pq, root.id) == "pending"


def test_the_pump_carries_and_releases(url, raw):
    from echomq import AsyncConnector
    from echomq.runtime.pump import Pump

    pq, cq = qname(), qname()
    kids = tuple(leaf(cq) for _ in range(3))
    root = Node(pq, ids.mint(), b"p", children=kids)

    async def main() -> dict[str, Any]:
        conn = await AsyncConnector.connect(url)
        try:
            await flows.admit(conn, root)
            while (c := await jobs.claim(conn, cq, 60_000)) is not None:
                await jobs.ack(conn, cq, c.id, c.token)
            pump = Pump(conn, [pq, cq], tick_ms=10)
            return await pump.tick()
        finally:
            await conn.close()

    report = asyncio.run(main())
    assert report["flows"] == 3 and report["queues"][cq]["flows"] == 3
    assert state(raw, pq, root.id) == "pending"


def test_children_results_reach_the_parent(conn, raw):
    pq, cq = qname(), qname()
    kids = tuple(leaf(cq) for _ in range(3))
    root = Node(pq, ids.mint(), b"p", children=kids)
    flows.admit(conn, root)
    while (c := jobs.claim(conn, cq, 60_000)) is not None:
        jobs.ack(conn, cq, c.id, c.token, False, result=f'{{"id":"{c.id}"}}',
                 keep_result_ms=60_000)
    carry_all(conn, [cq])
    seen = flows.children(conn, pq, root.id)
    assert [c.result for c in seen] == [f'{{"id":"{k.id}"}}'.encode() for k in kids]
    assert all(raw.exists(keyspace.job_key(cq, k.id)) == 0 for k in kids)  # rows deleted


@pytest.mark.slow
def test_echomq_job_shows_the_tree(server, raw_single):
    from tests.support.cli import echomq

    conn, _raw = raw_single
    qs = [qname() for _ in range(3)]
    mid = Node(qs[1], ids.mint(), b'{"task":"m","args":[],"kwargs":{}}',
               children=tuple(Node(qs[2], ids.mint(), b'{"task":"l","args":[],"kwargs":{}}')
                              for _ in range(25)))
    bad = Node(qs[1], ids.mint(), b'{"task":"b","args":[],"kwargs":{}}', policy="ignore")
    root = Node(qs[0], ids.mint(), b'{"task":"r","args":[],"kwargs":{}}', children=(mid, bad))
    flows.admit(conn, root)
    run_all(conn, qs[1], fail={bad.id})
    carry_all(conn, qs)
    got = echomq("job", root.id, "--queue", qs[0], url=server.url)
    assert got.returncode == 0, got.stderr
    out = got.stdout
    assert "waiting-children" in out and "children  2 (1 dead, 1 waiting-children)" in out
    assert f"├── {mid.id}  {qs[1]}  waiting-children" in out
    assert f"└── {bad.id}  {qs[1]}  dead  (boom)" in out
    assert "... and 5 more (5 pending)" in out
    child = echomq("job", mid.children[0].id, "--queue", qs[2], url=server.url)
    assert child.returncode == 0, child.stderr
    assert f"parent    {mid.id} (queue {qs[1]}, policy fail)" in child.stdout
    assert "Traceback" not in got.stderr + child.stderr


@pytest.fixture
def raw_single(server):
    from echomq import Connector

    conn = Connector.connect(server.url)
    yield conn, valkey.Valkey.from_url(server.url)
    conn.close()


def test_a_grouped_parent_is_released_to_its_lane_and_claimed(conn, raw):
    pq, cq = qname(), qname()
    kids = (leaf(cq, group="tenant-a"), leaf(cq))
    root = Node(pq, ids.mint(), b"p", children=kids, group="tenant-b")
    flows.admit(conn, root)
    assert jobs.stats(conn, cq)["enqueued"] == 2 and jobs.stats(conn, pq)["enqueued"] == 1
    assert sorted(run_all(conn, cq)) == sorted(k.id for k in kids)
    assert carry_all(conn, [cq]).released == 1
    assert raw.zscore(keyspace.lane_key(pq, "tenant-b"), root.id) is not None
    assert run_all(conn, pq) == [root.id]


def test_a_child_deleted_before_it_ran_does_not_leave_its_parent_waiting(conn, raw):
    from echomq.dashboard import insight
    pq, cq = qname(), qname()
    kids = (leaf(cq), leaf(cq, policy="drop"))
    root = Node(pq, ids.mint(), b"p", children=kids)
    flows.admit(conn, root)
    assert insight.discard(conn, cq, kids[1].id)
    run_all(conn, cq)
    assert carry_all(conn, [cq]).released == 1
    assert [c.id for c in flows.children(conn, pq, root.id)] == [kids[0].id]
    # under the default policy the deletion fails the parent instead
    root2 = Node(pq, ids.mint(), b"p", children=(leaf(cq),))
    flows.admit(conn, root2)
    assert insight.discard(conn, cq, root2.children[0].id)
    assert carry_all(conn, [cq]).failed == 1
    assert "discarded" in raw.hget(keyspace.job_key(pq, root2.id), "error").decode()


def test_reviving_a_parent_failed_by_a_child_waits_for_its_children_again(conn, raw):
    from echomq.verbs import dead
    pq, cq = qname(), qname()
    kids = (leaf(cq), leaf(cq))
    root = Node(pq, ids.mint(), b"p", children=kids)
    flows.admit(conn, root)
    run_all(conn, cq, fail={kids[0].id})
    carry_all(conn, [cq])
    assert state(raw, pq, root.id) == "dead"
    dead.revive(conn, pq, root.id)  # the operator revives the parent first
    assert state(raw, pq, root.id) == "waiting-children"
    assert jobs.claim(conn, pq, 60_000) is None  # not before its failed child completes
    dead.revive(conn, cq, kids[0].id)
    run_all(conn, cq)
    assert carry_all(conn, [cq]).released == 1
    assert run_all(conn, pq) == [root.id]


def test_a_refused_carry_keeps_its_entries(conn, raw):
    cq = qname()
    outbox = keyspace.queue_key(cq, "flow:outbox")
    raw.xadd(outbox, {"child": ids.mint(), "parent": keyspace.job_key(qname(), "nope"),
                      "how": "completed", "seq": 1, "policy": "fail"})
    got = flows.carry(conn, cq)
    assert (got.read, got.refused, got.counted) == (1, 1, 0)
    assert raw.xlen(outbox) == 1


def test_electing_pumps_carry_a_queue_from_one_holder_at_a_time(url, raw):
    import time as _time

    from echomq import AsyncConnector
    from echomq.runtime.pump import Pump

    pq, cq = qname(), qname()
    roots = [Node(pq, ids.mint(), b"p", children=(leaf(cq),)) for _ in range(2)]

    async def main() -> tuple[int, int, int]:
        conn = await AsyncConnector.connect(url)
        try:
            a = Pump(conn, [cq], tick_ms=50, legs=("flows",), elect=True)
            b = Pump(conn, [cq], tick_ms=50, legs=("flows",), elect=True)
            await flows.admit(conn, roots[0])
            c = await jobs.claim(conn, cq, 60_000)
            assert c is not None
            await jobs.ack(conn, cq, c.id, c.token)
            first = (await a.tick())["flows"], (await b.tick())["flows"]
            await flows.admit(conn, roots[1])
            c = await jobs.claim(conn, cq, 60_000)
            assert c is not None
            await jobs.ack(conn, cq, c.id, c.token)
            assert (await b.tick())["flows"] == 0  # a still holds the lease: b stands by
            _time.sleep(0.2)  # a stops ticking: its lease (3 ticks) lapses
            return first[0], first[1], (await b.tick())["flows"]
        finally:
            await conn.close()

    assert asyncio.run(main()) == (1, 0, 1)
    assert all(state(raw, pq, r.id) == "pending" for r in roots)
