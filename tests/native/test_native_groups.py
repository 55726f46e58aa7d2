"""Grouped claims and acks natively (emq_group.c), differentially against the scripts.

Two fresh queues on one module-loaded server get the same random grouped workload: one
through a wire-4 connector (the claim, ack and ack_many scripts), the other through wire 6
(EMQ.CLAIM, EMQ.ACK, EMQ.ACKMANY). The workload mixes flat and grouped jobs, weights,
group limits (own and the queue's defaults), group rates (windows that fill and send the
group to gwait), waits on gwait that end (the claim's reopen), a queue cap and paused
groups. Every reply must agree; at the end every
key must: the ring's keys (ring, ringseq, turn, metas, lanes, pending, wake, ...) byte for
byte (DUMP: a hash's field order included), the rest as the plain differential test
compares them (a value priced on the server clock within a tolerance; a rate log's buckets
are named by the ms they were recorded at, so those compare by their counts). And the
wire-6 side must have been the module throughout: no native call handed back.
"""

from __future__ import annotations

from typing import Any

import pytest
import valkey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import Connector
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import groups, jobs
from tests.native.test_native_diff import assert_same_state
from tests.support.native import base, fresh_queue, k, send, snapshot

LEASE = 60_000
WINDOW = 10**8  # a rate window no run outlives: a full one never reopens mid-test
GROUPS = ["ga", "gb", "gc"]


def job_id(n: int) -> str:
    return f"JOB01{chr(65 + n // 26)}{chr(65 + n % 26)}" + "A" * 22


controls = st.one_of(
    st.tuples(st.just("weight"), st.sampled_from(GROUPS), st.integers(1, 3)),
    st.tuples(st.just("limit"), st.sampled_from(GROUPS), st.sampled_from([None, 1, 2])),
    st.tuples(st.just("rate"), st.sampled_from(GROUPS), st.integers(1, 4)),
    st.tuples(st.just("unrate"), st.sampled_from(GROUPS)),
    st.tuples(st.just("defaults"), st.sampled_from([None, 1, 3]),
              st.sampled_from([None, 2, 5])),
    st.tuples(st.just("cap"), st.sampled_from([None, 2, 4])),
    st.tuples(st.just("pause"), st.sampled_from(GROUPS)),
    st.tuples(st.just("due"), st.sampled_from(GROUPS)),  # its wait on gwait is over now
    st.tuples(st.just("resume"), st.sampled_from(GROUPS)),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.sampled_from([None, *GROUPS, *GROUPS]),
                  st.sampled_from([0, 0, 0, 5])),
        st.tuples(st.just("burst"), st.sampled_from(GROUPS), st.integers(2, 5)),
        st.tuples(st.just("claim"), st.integers(1, 6)),
        st.tuples(st.just("claim"), st.integers(1, 6)),
        st.tuples(st.just("ack"), st.integers(0, 9), st.booleans()),
        st.tuples(st.just("ackmany"), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("ackclaim"), st.integers(0, 3), st.integers(1, 4)),
        controls,
        st.tuples(st.just("weight"), st.sampled_from(GROUPS), st.integers(2, 3)),
    ),
    min_size=6,
    max_size=50,
)


def step(conn: Connector, q: str, op: tuple, held: dict[str, int], minted: int,
         claim_id: str | None = None) -> Any:
    verb = op[0]
    if verb == "burst":  # n jobs on one group's lane
        return [jobs.enqueue(conn, q, job_id(minted + i), b"b", group=op[1])
                for i in range(op[2])]
    if verb == "enqueue":
        return jobs.admit(conn, q, job_id(minted), b"p%d" % minted, group=op[1],
                          priority=op[2])
    if verb == "claim":  # odd counts carry a fresh claim id (recorded as the script records it)
        return jobs.claim_many(conn, q, LEASE, op[1], claim_id if op[1] % 2 else None)
    if verb == "ack":
        job = sorted(held)[op[1] % len(held)]
        return jobs.ack(conn, q, job, held[job], keep=op[2])
    if verb == "ackmany":  # the first k held, and one repeated
        mine = sorted(held)[:op[1]]
        items = [(j, held[j]) for j in mine] + [(mine[0], held[mine[0]])]
        return [None if r is None else r.text for r in jobs.ack_many(conn, q, items, op[2])]
    if verb == "ackclaim":
        mine = sorted(held)[:op[1]]
        refused, got = jobs.ack_and_claim(conn, q, [(j, held[j]) for j in mine], LEASE, op[2])
        return [None if r is None else r.text for r in refused], got
    if verb == "weight":
        return groups.set_weight(conn, q, op[1], op[2])
    if verb == "limit":
        return groups.set_limit(conn, q, op[1], op[2])
    if verb == "rate":
        return groups.set_rate(conn, q, op[1], op[2], WINDOW)
    if verb == "unrate":
        return groups.clear_rate(conn, q, op[1])
    if verb == "defaults":
        rate = None if op[2] is None else (op[2], WINDOW)
        return groups.set_defaults(conn, q, limit=op[1], rate=rate)
    if verb == "cap":  # the queue cap, as declare_limit writes it
        return conn.client.delete(k(q, "limit")) if op[1] is None else conn.client.set(
            k(q, "limit"), op[1])
    if verb == "pause":
        return groups.pause(conn, q, op[1])
    if verb == "due":
        return conn.client.zadd(k(q, "gwait"), {op[1]: 1}, xx=True)
    return groups.resume(conn, q, op[1])


def logs_by_count(state: dict[str, tuple[str, Any]]) -> dict[str, tuple[str, Any]]:
    """A rate log's buckets are named by the ms they were recorded at (two claims a ms
    apart on one side may share one on the other): by the starts they hold."""
    out = {}
    for key, (kind, content) in state.items():
        if key.endswith(":starts"):
            content = None
        elif key.endswith(":starts:n"):
            content = (content.get("total"),
                       sum(int(v) for f, v in content.items() if f != "total"))
        out[key] = (kind, content)
    return out


EXACT = ("ring", "ringseq", "turn", "pending", "wake", "gdefaults", "groups", "limit")


def dumps(r: valkey.Valkey, q: str) -> dict[str, bytes | None]:
    """DUMP of every key whose bytes no clock touches."""
    keys = [n for n in snapshot(r, q) if n in EXACT or (
        n.startswith("g:") and not n.endswith((":starts", ":starts:n")))]
    return {n: r.dump(base(q) + n) for n in keys}


def failed_native(r: valkey.Valkey) -> int:
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_emq.{n}", {}).get("failed_calls", 0))
               for n in ("claim", "ack", "ackmany"))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(script=ops)
def test_grouped_workloads_agree(wires: tuple[Connector, Connector], script: list[tuple]
                                 ) -> None:
    c4, c6 = wires
    q4, q6 = fresh_queue(), fresh_queue()
    held: dict[str, int] = {}
    minted = 0
    handed_back = failed_native(c6.client)
    for i, op in enumerate(script):
        if op[0] in ("ack", "ackmany") and not held:
            continue
        r4 = step(c4, q4, op, held, minted, f"c{i}")
        r6 = step(c6, q6, op, held, minted, f"c{i}")
        assert r4 == r6, op
        if op[0] == "enqueue":
            minted += 1
        elif op[0] == "burst":
            minted += op[2]
        elif op[0] == "claim":
            held.update({c.id: c.token for c in r4})
        elif op[0] == "ack":
            del held[sorted(held)[op[1] % len(held)]]
        elif op[0] in ("ackmany", "ackclaim"):
            for j in sorted(held)[:op[1]]:
                del held[j]
            if op[0] == "ackclaim":
                held.update({c.id: c.token for c in r4[1]})
    assert failed_native(c6.client) == handed_back  # the module ran every call
    assert dumps(c4.client, q4) == dumps(c6.client, q6)
    assert_same_state(logs_by_count(snapshot(c4.client, q4)),
                      logs_by_count(snapshot(c6.client, q6)))


def test_a_weighted_ring_claims_natively_in_the_scripts_order(r: valkey.Valkey,
                                                               srv: EmbeddedServer) -> None:
    """Weights 3 and 1 over two busy groups: 3/4 and 1/4 of the claims, the same jobs in
    the same order as the script, and the module's calls did not fail."""
    with Connector.connect(srv.url, wire=4) as c4, Connector.connect(srv.url, wire=6) as c6:
        order = {}
        for conn in (c4, c6):
            q = fresh_queue()
            for n in range(16):
                jobs.enqueue(conn, q, job_id(n), b"x", group="heavy" if n % 2 else "light")
            groups.set_weight(conn, q, "heavy", 3)
            before = failed_native(r)
            got = [c.id for _ in range(4) for c in jobs.claim_many(conn, q, LEASE, 2)]
            assert failed_native(r) == before
            order[conn.wire] = got
        assert order[4] == order[6]
        heavy = sum(1 for j in order[6] if int(ord(j[6]) - 65) % 2)
        assert heavy == 6  # 8 claims: 3 heavy per light, twice


@pytest.mark.parametrize("setup", [
    lambda r, q: r.set(k(q, "g:g"), "x"),  # the group's meta is no hash
    lambda r, q: r.hset(k(q, "g:g"), "active", "many"),
    lambda r, q: r.set(k(q, "ringseq"), "x"),
    lambda r, q: r.set(k(q, "gwait"), "x"),
])
def test_a_grouped_ack_hands_back_an_odd_group_and_writes_nothing(r: valkey.Valkey, q: str,
                                                                 setup: Any) -> None:
    from tests.support.native import refused

    r.hset(k(q, "job:" + job_id(0)), mapping={"state": "pending", "attempts": "0",
                                              "payload": "p", "group": "g"})
    r.zadd(k(q, "g:g:pending"), {job_id(0): 0})
    r.zadd(k(q, "ring"), {"g": 1})
    got = send(r, "EMQ.CLAIM", 2, k(q, "pending"), k(q, "active"), base(q), LEASE, 1)
    assert got[0].decode() == job_id(0)
    setup(r, q)
    ack = ("EMQ.ACK", 3, k(q, "job:" + job_id(0)), k(q, "active"), k(q, "completed"),
           job_id(0), got[1], 1)
    refused(r, q, ack, "EMQSTATE ack lane not native")
    refused(r, q, ("EMQ.ACKMANY", 2, k(q, "active"), k(q, "completed"), base(q), "1",
                   job_id(0), got[1]), "EMQSTATE ack lane not native")


FAR_MS = 40_000_000_000_000


def reopening(conn: Connector, q: str) -> None:
    """Four groups waiting on gwait, every wait over: ga (a rate block), gb (a timed pause
    that has ended), gc (a pause that ends far ahead: back on gwait), gd (at its limit)."""
    r = conn.client
    for n, g in enumerate(["ga", "ga", "gb", "gc", "gd", "gd"]):
        jobs.enqueue(conn, q, job_id(n), b"r", group=g)
    jobs.enqueue(conn, q, job_id(9), b"flat")
    r.hset(k(q, "g:gb"), mapping={"paused": 1, "paused_until": 5})
    r.hset(k(q, "g:gc"), mapping={"paused": 1, "paused_until": FAR_MS})
    r.hset(k(q, "g:gd"), mapping={"limit": 1, "active": 1})
    for g in ("ga", "gb", "gc", "gd"):
        r.zrem(k(q, "ring"), g)
        r.zadd(k(q, "gwait"), {g: 7})
    r.delete(k(q, "wake"))


@pytest.mark.parametrize("paused", [False, True])
def test_groups_whose_wait_is_over_rejoin_the_ring_natively(
        wires: tuple[Connector, Connector], paused: bool) -> None:
    """The script's reopen: the same ring, gwait, metas and claims, and no hand-back (a
    paused queue claims nothing but reopens all the same)."""
    c4, c6 = wires
    q4, q6 = fresh_queue(), fresh_queue()
    replies = []
    handed_back = failed_native(c6.client)
    for conn, q in ((c4, q4), (c6, q6)):
        reopening(conn, q)
        if paused:
            jobs.pause(conn, q)
        replies.append([c.id for c in jobs.claim_many(conn, q, LEASE, 4)])
    assert failed_native(c6.client) == handed_back
    assert replies[0] == replies[1]
    assert replies[1] == ([] if paused else [job_id(9), job_id(0), job_id(2), job_id(1)])
    assert dumps(c4.client, q4) == dumps(c6.client, q6)
    assert_same_state(logs_by_count(snapshot(c4.client, q4)),
                      logs_by_count(snapshot(c6.client, q6)))
    gwait = snapshot(c6.client, q6)["gwait"][1]
    assert gwait == {"gc": float(FAR_MS)}  # the pause that ends later waits for its end
