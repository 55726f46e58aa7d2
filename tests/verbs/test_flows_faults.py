"""Flows under load and faults: a depth-3 / width-100 tree over 3 queues on 3 different
cluster shards, a Pump SIGKILLed mid-carry, and a hypothesis state machine over admission
(also cut short, then rolled back; nodes linked by unique keys), settlement and carries.
Each parent must run exactly once, after all its children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest
import valkey
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from echomq import Connector
from echomq.core import ids, keyspace, steps
from echomq.verbs import dead, flows, jobs
from echomq.verbs.flows import Node
from tests.support.flows import pausing, spread_queues


def big_tree(qs: list[str], width: int) -> Node:
    """Depth 3: a root in qs[0], 3 middles in qs[1], each with ``width`` leaves over
    qs[2] and qs[0] (so one queue holds both a parent and some of its grandchildren)."""
    mids = tuple(
        Node(qs[1], ids.mint(), b"mid", children=tuple(
            Node(qs[2] if i % 3 else qs[0], ids.mint(), b"leaf") for i in range(width)))
        for _ in range(3))
    return Node(qs[0], ids.mint(), b"root", children=mids)


def drive(conn: Connector, qs: list[str], root: Node, raw: Any) -> list[str]:
    """Run the tree to the end with claims/acks and carries, checking at every claim of
    a parent that all its children have ended; the ids in the order they ran."""
    parents = {n.id: n for n in root.walk() if n.children}
    ran: list[str] = []
    while True:
        moved = False
        for q in qs:
            for c in jobs.claim_many(conn, q, 60_000, 64):
                moved = True
                node = parents.get(c.id)
                if node is not None:
                    kids = flows.children(conn, q, c.id)
                    assert [k.id for k in kids] == [k.id for k in node.children]
                    assert all(k.state == "completed" for k in kids)
                    assert all(k.id in ran for k in kids)
                    assert kids[0].result == b'"ok"'
                ran.append(c.id)
                jobs.ack(conn, q, c.id, c.token, False, result='"ok"', keep_result_ms=60_000)
        for q in qs:
            got = flows.carry(conn, q)
            moved = moved or got.read > 0
        if not moved:
            return ran


@pytest.mark.parametrize("topology", ["single", "cluster"])
def test_depth_three_width_hundred_over_three_shards(topology, request):
    if topology == "cluster":
        cl = request.getfixturevalue("cluster")
        qs = spread_queues(cl, 3)
        url = cl.url
    else:
        qs = ["fx-" + uuid.uuid4().hex[:8] for _ in range(3)]
        url = request.getfixturevalue("server").url
    conn = Connector.connect(url)
    try:
        root = big_tree(qs, 100)
        if topology == "cluster":  # parent and children really on different shards
            owner = request.getfixturevalue("cluster").owner
            assert len({owner(keyspace.queue_key(q, "pending")).port for q in qs}) == 3
        flows.admit(conn, root)
        ran = drive(conn, qs, root, None)
        every = [n.id for n in root.walk()]
        assert sorted(ran) == sorted(every)  # each node ran exactly once
        assert ran[-1] == root.id
        for q in qs:
            assert flows.outbox_size(conn, q) == 0
            assert jobs.counts(conn, q)["pending"] == 0
    finally:
        conn.close()


PUMP = textwrap.dedent("""
    import asyncio, sys
    from echomq import AsyncConnector
    from echomq.runtime.pump import Pump

    async def main():
        conn = await AsyncConnector.connect(sys.argv[1])
        pump = Pump(conn, [sys.argv[2]], tick_ms=1)
        pump.sweep_batch = 7
        print("ready", flush=True)
        await pump.run(asyncio.Event())

    asyncio.run(main())
""")


@pytest.mark.slow
def test_a_pump_killed_mid_carry_loses_and_doubles_nothing(server):
    conn = Connector.connect(server.url)
    raw = valkey.Valkey.from_url(server.url)
    pq, cq = "fk-" + uuid.uuid4().hex[:8], "fk-" + uuid.uuid4().hex[:8]
    n = 3000
    root = Node(pq, ids.mint(), b"p", children=tuple(Node(cq, ids.mint(), b"c")
                                                       for _ in range(n)))
    flows.admit(conn, root)
    while got := jobs.claim_many(conn, cq, 60_000, 500):
        jobs.ack_many(conn, cq, [(c.id, c.token) for c in got], False)
    assert flows.outbox_size(conn, cq) == n
    kills = 0
    deps = keyspace.queue_key(pq, f"deps:{root.id}")
    for _ in range(4):  # SIGKILL pumps while they carry, small batches, many kills
        proc = subprocess.Popen([sys.executable, "-c", PUMP, server.url, cq],
                                stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        before = raw.scard(deps)
        deadline = time.monotonic() + 10
        while raw.scard(deps) == before and time.monotonic() < deadline:
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        # never released early: some children are still not carried
        if raw.scard(deps) > 0:
            assert raw.hget(keyspace.job_key(pq, root.id), "state") == b"waiting-children"
    assert kills == 4
    left = raw.scard(deps)
    assert 0 < left < n  # the kills really happened mid-flow
    total = flows.Carried()
    while (got := flows.carry(conn, cq, 100)).read:
        total = total.plus(got)
    assert raw.scard(deps) == 0
    assert total.released == 1
    assert raw.hget(keyspace.job_key(pq, root.id), "state") == b"pending"
    assert raw.zcard(keyspace.queue_key(pq, "pending")) == 1
    # every child counted exactly once: one settlement number per child on the parent
    flow = raw.hgetall(keyspace.queue_key(pq, f"flow:{root.id}"))
    assert sum(1 for k in flow if k.startswith(b"n:")) == n
    assert set(flow[k] for k in flow if k.startswith(b"n:")) == {b"1"}
    conn.close()


class FlowMachine(RuleBasedStateMachine):
    """Trees of up to 2 levels over 2 queues; children are acked, failed (dead), revived
    or their outbox entries carried (also twice, as a racing Pump would, and out of
    order). Some children carry unique keys (a child whose key a live job owns is linked
    to it); some admissions are cut short after their first level, and a turn of the carry
    leg rolls them back. Invariants: a parent is pending/active only if every child's
    latest end is completed (or tolerated by its policy); no parent is ever released
    twice, none of a cut admission ever; and at the end, once every dead child is revived,
    the cut flows rolled back and everything has run, every other parent has run exactly
    once (none stuck)."""

    def __init__(self) -> None:
        super().__init__()
        self.conn = Connector.connect(URL[0])
        self.raw = valkey.Valkey.from_url(URL[0])
        self.qs = ["hm-" + uuid.uuid4().hex[:6] for _ in range(2)]
        self.parents: dict[str, Node] = {}
        self.releases: dict[str, int] = {}
        self.replay: list[tuple[str, dict[bytes, bytes]]] = []
        self.cut: set[str] = set()  # roots of admissions cut short (and their parents)
        self.linked: set[str] = set()

    def teardown(self) -> None:
        """None stuck: revive every dead child, run and carry everything until nothing
        moves; then every parent has run exactly once."""
        try:
            self.roll_back()
            for _ in range(100):
                moved = False
                for q in self.qs:
                    for d in dead.list_dead(self.conn, q, 0, 100):
                        if d["id"] not in self.parents:
                            dead.revive(self.conn, q, d["id"])
                            moved = True
                    while (c := jobs.claim(self.conn, q, 60_000)) is not None:
                        moved = True
                        self.ran(q, c.id)
                        jobs.ack(self.conn, q, c.id, c.token)
                    moved = flows.carry(self.conn, q, 100).read > 0 or moved
                if not moved:
                    break
            assert all(n == (0 if p in self.cut else 1)
                       for p, n in self.releases.items()), self.releases
            for pid in self.cut & set(self.parents):
                state = self.raw.hget(keyspace.job_key(self.parents[pid].queue, pid), "state")
                assert state in (b"cancelled", None), (pid, state)
        finally:
            self.conn.close()

    def ran(self, queue: str, job_id: str) -> None:
        if job_id in self.parents:
            self.releases[job_id] += 1
            self.check_children(queue, job_id)

    @rule(width=st.integers(1, 4), policies=st.lists(st.sampled_from(flows.POLICIES),
                                                      min_size=4, max_size=4),
          nested=st.booleans(),
          keys=st.lists(st.sampled_from([None, "a", "b"]), min_size=4, max_size=4),
          cut=st.booleans())
    def admit(self, width: int, policies: list[str], nested: bool, keys: list[str | None],
              cut: bool) -> None:
        if len(self.parents) >= 4:
            return
        kids = [Node(self.qs[1], ids.mint(), b"c", policy=policies[i], unique=keys[i])
                for i in range(width)]
        if nested:
            kids[0] = Node(self.qs[0], kids[0].id, b"m", policy=policies[0],
                           children=(Node(self.qs[1], ids.mint(), b"g"),))
        root = Node(self.qs[0], ids.mint(), b"p", children=tuple(kids))
        if cut:  # the client dies once the root is written: no child ever comes
            def die() -> None:
                raise EOFError

            with pytest.raises(EOFError):
                steps.drive(self.conn, pausing(flows.admit.steps(root, 1), 1, die))
            self.cut.update(n.id for n in root.walk())
        else:
            out = flows.admit(self.conn, root)
            self.linked.update(out.links)
            for n in root.walk():
                if n.children and n.id in out and n.id not in out.links:
                    self.parents[n.id] = n
                    self.releases[n.id] = 0
        if cut:
            self.parents[root.id] = root
            self.releases[root.id] = 0

    @rule()
    def roll_back(self) -> None:
        """A turn of the carry leg past the (1 ms) deadline rolls the cut flows back."""
        time.sleep(0.002)
        for root in flows.turn(self.conn, self.qs[0], "machine", 60_000).stale:
            assert root in self.cut
            flows.roll_back(self.conn, self.qs[0], root)

    @rule(q=st.integers(0, 1), ok=st.booleans())
    def settle_one(self, q: int, ok: bool) -> None:
        queue = self.qs[q]
        c = jobs.claim(self.conn, queue, 60_000)
        if c is None:
            return
        self.ran(queue, c.id)
        if ok or c.id in self.parents:  # parents never fail here (the drain checks them)
            jobs.ack(self.conn, queue, c.id, c.token)
        else:
            jobs.retry(self.conn, queue, c.id, c.token, 0, 1, "boom")

    @rule(q=st.integers(0, 1))
    def revive_one(self, q: int) -> None:
        got = [d["id"] for d in dead.list_dead(self.conn, self.qs[q], 0, 20)
               if d["id"] not in self.parents]
        if got:
            dead.revive(self.conn, self.qs[q], got[0])

    @rule(q=st.integers(0, 1), batch=st.integers(1, 3), keep=st.booleans())
    def carry(self, q: int, batch: int, keep: bool) -> None:
        outbox = keyspace.queue_key(self.qs[q], "flow:outbox")
        if keep:  # remember entries, as a racing Pump that read them before us would
            self.replay += [(self.qs[q], f) for _, f in self.raw.xrange(outbox, count=batch)]
        flows.carry(self.conn, self.qs[q], batch)

    @rule()
    def late_replay(self) -> None:
        if self.replay:
            queue, fields = self.replay.pop(0)
            self.raw.xadd(keyspace.queue_key(queue, "flow:outbox"), fields)

    def check_children(self, queue: str, pid: str) -> None:
        node = self.parents[pid]
        seen = {c.id: c for c in flows.children(self.conn, queue, pid)}
        for kid in node.children:
            row = self.raw.hget(keyspace.job_key(kid.queue, kid.id), "state")
            if kid.id in self.linked and row is None:
                row = b"completed"  # a linked stub leaves with its completed owner
            if kid.policy == "fail":
                assert row == b"completed", (kid, row)
                assert seen[kid.id].state == "completed"
            elif kid.policy == "ignore":
                # its death counted as its end (it may have been revived since)
                assert seen[kid.id].state in ("completed", "dead"), (kid, row)
            else:  # drop: a death takes it out of the list
                assert kid.id not in seen or seen[kid.id].state == "completed", (kid, row)

    @invariant()
    def released_at_most_once(self) -> None:
        for pid, n in self.releases.items():
            assert n <= 1, pid
            state = self.raw.hget(keyspace.job_key(self.parents[pid].queue, pid), "state")
            if state in (b"pending", b"active"):
                deps = keyspace.queue_key(self.parents[pid].queue, f"deps:{pid}")
                assert self.raw.scard(deps) == 0


URL: list[str] = []


@pytest.mark.slow
def test_flow_state_machine(server):
    URL[:] = [server.url]
    FlowMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40,
                                             deadline=None)
    FlowMachine.TestCase().runTest()
