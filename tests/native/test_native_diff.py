"""Differential property test: the same random valid inputs through wire 4 and wire 6.

Two fresh queues on one module-loaded server get the same sequence of verbs (enqueue,
schedule at or in, promote, claim, delay, ack) with the same ids and payloads: one queue
through a wire-4 connector (scripts), the other through wire 6 (the module for schedule, promote
and delay). Every outcome must agree, and at the end so must every key of the two
queues: rows, pending, schedule, active, completed and the wake list.

What must differ is masked, not skipped: a score or field priced on the server clock
(an 'in' schedule, a lease, a completion time) is compared within a tolerance, since the
two calls ran a few ms apart. Inputs are valid ones only; where the twins diverge on
purpose (ghosts, grouped rows, native-only refusals) is test_native_divergence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from echomq import Connector
from echomq.verbs import jobs
from tests.support.native import base, fresh_queue, snapshot

FAR = 40_000_000_000_000
CLOCK_LOW = 10**12  # any score/field at or above this (and below FAR) was priced on a clock
TOLERANCE_MS = 30_000
IDS = [f"JOB01{chr(65 + i) * 24}" for i in range(6)]

at_values = st.one_of(st.integers(0, 10**6), st.integers(FAR, FAR + 10**6))
in_values = st.one_of(st.just(0), st.integers(3_600_000, 10**9))
schedules = st.one_of(
    st.tuples(st.just("schedule"), st.sampled_from(IDS), st.just("at"), at_values,
              st.binary(max_size=6)),
    st.tuples(st.just("schedule"), st.sampled_from(IDS), st.just("at"), st.integers(0, 99),
              st.binary(max_size=6)),
    st.tuples(st.just("schedule"), st.sampled_from(IDS), st.just("in"), in_values,
              st.binary(max_size=6)),
)
# an admission with the option tail (EMQ.ENQUEUE / EMQ.SCHEDULE take it at wire 6): a
# priority, a unique key from a small set (so owners collide), a unique_for window, a notify
admits = st.tuples(
    st.just("admit"), st.sampled_from(IDS), st.binary(max_size=6),
    st.sampled_from(["now", "now", "at", "in"]), st.one_of(at_values, in_values),
    st.sampled_from([0, 0, 1, 7, 1_000_000]), st.sampled_from([None, "k1", "k2"]),
    st.sampled_from([None, None, 60_000]), st.sampled_from([None, 5_000]),
)
ops = st.lists(
    st.one_of(
        schedules,
        schedules,
        admits,
        admits,
        st.tuples(st.just("enqueue"), st.sampled_from(IDS), st.binary(max_size=6)),
        st.tuples(st.just("promote"), st.integers(1, 4)),
        st.tuples(st.just("promote"), st.integers(1, 4)),
        st.tuples(st.just("claim"), st.integers(1, 3)),
        st.tuples(st.just("claim"), st.integers(1, 3)),
        st.tuples(st.just("delay"), st.integers(0, 5), st.just("at"), at_values),
        st.tuples(st.just("delay"), st.integers(0, 5), st.just("in"), in_values),
        st.tuples(st.just("delay"), st.integers(0, 5), st.just("at"), st.integers(0, 99)),
        st.tuples(st.just("ack"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("ack"), st.integers(0, 5), st.booleans(), st.just(b'{"r": 1}')),
        st.tuples(st.just("ackmany"), st.integers(1, 4), st.booleans(), st.booleans()),
        st.tuples(st.just("ackclaim"), st.integers(0, 3), st.integers(0, 3), st.booleans()),
    ),
    min_size=4,
    max_size=40,
)


def clocked(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if CLOCK_LOW <= v < FAR else None


def same(a: Any, b: Any) -> bool:
    """Equal, or both priced on the server clock within the tolerance."""
    if a == b:
        return True
    ca, cb = clocked(a), clocked(b)
    return ca is not None and cb is not None and abs(ca - cb) <= TOLERANCE_MS


def assert_same_state(s4: dict[str, Any], s6: dict[str, Any]) -> None:
    assert s4.keys() == s6.keys()
    for key, (kind, content) in s4.items():
        kind6, content6 = s6[key]
        assert kind == kind6, key
        if isinstance(content, dict):
            assert content.keys() == content6.keys(), key
            for field, value in content.items():
                assert same(value, content6[field]), (key, field, value, content6[field])
        else:
            assert content == content6, key


def step(conn: Connector, q: str, op: tuple, held: dict[str, int]) -> Any:
    verb = op[0]
    if verb == "schedule":
        _, job, mode, value, payload = op
        if mode == "at":
            return jobs.enqueue_at(conn, q, job, payload, value)
        return jobs.enqueue_in(conn, q, job, payload, value)
    if verb == "enqueue":
        return jobs.enqueue(conn, q, op[1], op[2])
    if verb == "admit":
        _, job, payload, mode, value, priority, unique, unique_for, notify = op
        # an 'in' is due at once or an hour away at the least: never between the two wires'
        # calls, which run a few ms apart
        value = value if mode == "at" else (0 if value < 3_600_000 else min(value, 10**9))
        return jobs.admit(conn, q, job, payload, mode=mode, value=value, priority=priority,
                          unique=unique, unique_for_ms=unique_for if unique else None,
                          notify_ms=notify)
    if verb == "promote":
        return jobs.promote(conn, q, op[1])
    if verb == "claim":
        return jobs.claim_many(conn, q, 60_000, op[1])
    if verb == "ackmany":  # the first k held, one repeated, one with a stale token
        _, k, keep, results = op
        mine = sorted(held)[:k]
        items: list = [(j, held[j], b"[1]", 60_000) if results else (j, held[j]) for j in mine]
        items += [(mine[0], held[mine[0]]), (mine[-1], held[mine[-1]] + 1)]
        return [None if r is None else r.text for r in jobs.ack_many(conn, q, items, keep)]
    if verb == "ackclaim":
        _, k, count, keep = op
        mine = sorted(held)[:k]
        refused, got = jobs.ack_and_claim(conn, q, [(j, held[j]) for j in mine], 60_000, count,
                                          keep)
        return [None if r is None else r.text for r in refused], got
    job = sorted(held)[op[1] % len(held)]
    if verb == "delay":
        return jobs.delay(conn, q, job, held[job], op[3], mode=op[2])
    if len(op) == 4:
        return jobs.ack(conn, q, job, held[job], keep=op[2], result=op[3], keep_result_ms=60_000)
    return jobs.ack(conn, q, job, held[job], keep=op[2])


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(script=ops)
def test_wire4_and_wire6_agree(wires: tuple[Connector, Connector], script: list[tuple]) -> None:
    c4, c6 = wires
    q4, q6 = fresh_queue(), fresh_queue()
    held: dict[str, int] = {}
    for op in script:
        if op[0] in ("delay", "ack", "ackmany") and not held:
            continue
        r4 = step(c4, q4, op, held)
        r6 = step(c6, q6, op, held)
        assert r4 == r6, op
        event(f"{op[0]} ran" + (" and released" if op[0] == "promote" and r4 else ""))
        if op[0] == "claim":
            held.update({c.id: c.token for c in r4})
        elif op[0] in ("delay", "ack"):
            del held[sorted(held)[op[1] % len(held)]]
        elif op[0] == "ackmany":
            for j in sorted(held)[:op[1]]:
                del held[j]
        elif op[0] == "ackclaim":
            for j in sorted(held)[:op[1]]:
                del held[j]
            held.update({c.id: c.token for c in r4[1]})
    assert_same_state(snapshot(c4.client, q4), snapshot(c6.client, q6))


def test_native_commands_really_ran(wires: tuple[Connector, Connector]) -> None:
    """The wire-6 side above is the module, not the script: its calls show in commandstats."""
    _, c6 = wires
    q = fresh_queue()
    before = c6.client.info("commandstats")
    jobs.enqueue_at(c6, q, IDS[0], b"x", 1)
    jobs.promote(c6, q, 10)
    claim = jobs.claim(c6, q, 60_000)
    assert claim is not None
    jobs.delay(c6, q, claim.id, claim.token, 5, mode="at")
    jobs.promote(c6, q, 10)
    claim = jobs.claim(c6, q, 60_000)
    assert claim is not None
    jobs.ack(c6, q, claim.id, claim.token)
    jobs.ack_many(c6, q, [(claim.id, claim.token)])
    after = c6.client.info("commandstats")
    for name in ("emq.claim", "emq.ack", "emq.ackmany"):
        calls = after[f"cmdstat_{name}"]["calls"]
        assert calls == before.get(f"cmdstat_{name}", {"calls": 0})["calls"] + (
            2 if name == "emq.claim" else 1)
        # none handed back to a script: a refusal is a failed call
        assert after[f"cmdstat_{name}"]["failed_calls"] == before.get(
            f"cmdstat_{name}", {"failed_calls": 0})["failed_calls"]
    for name in ("emq.schedule", "emq.delay"):
        calls = after[f"cmdstat_{name}"]["calls"]
        assert calls == before.get(f"cmdstat_{name}", {"calls": 0})["calls"] + 1
    # with options: the module too (a group alone rides the script)
    before = after
    jobs.admit(c6, q, IDS[1], b"y", priority=3, unique="u", unique_for_ms=1_000, notify_ms=5)
    jobs.admit(c6, q, IDS[2], b"y", mode="in", value=10, priority=3, unique="v")
    jobs.admit(c6, q, IDS[3], b"y", group="g")
    after = c6.client.info("commandstats")
    for name, more in (("emq.enqueue", 1), ("emq.schedule", 1)):
        calls = after[f"cmdstat_{name}"]["calls"]
        assert calls == before.get(f"cmdstat_{name}", {"calls": 0})["calls"] + more


def notifications(conn: Connector, q: str, run: Callable[[str], None]) -> set[tuple[str, str]]:
    """The (key relative to the queue base, event) pairs ``run(q)`` publishes."""
    pubsub = conn.client.pubsub()
    prefix = base(q)
    pubsub.psubscribe(f"__keyspace@0__:{prefix.replace('{', '[{]').replace('}', '[}]')}*")
    pubsub.get_message(timeout=1.0)  # the subscribe confirmation
    run(q)
    seen: set[tuple[str, str]] = set()
    while (msg := pubsub.get_message(timeout=0.3)) is not None:
        if msg["type"] == "pmessage":
            key = msg["channel"].decode().split(":", 1)[1]
            seen.add((key[len(prefix):], msg["data"].decode()))
    pubsub.close()
    return seen


def test_keyspace_notifications_agree(wires: tuple[Connector, Connector]) -> None:
    """The module publishes the events the script's commands would (one per key and kind)."""
    c4, c6 = wires
    old = c4.call("CONFIG", "GET", "notify-keyspace-events")[1]
    c4.call("CONFIG", "SET", "notify-keyspace-events", "KA")
    try:
        def story(conn: Connector) -> Callable[[str], None]:
            def run(q: str) -> None:
                jobs.enqueue_at(conn, q, IDS[0], b"x", 1)
                jobs.enqueue_at(conn, q, IDS[1], b"y", FAR)
                jobs.promote(conn, q, 10)
                claim = jobs.claim(conn, q, 60_000)
                assert claim is not None
                jobs.delay(conn, q, claim.id, claim.token, 5, mode="at")
            return run

        n4 = notifications(c4, fresh_queue(), story(c4))
        n6 = notifications(c6, fresh_queue(), story(c6))
        assert n4 == n6
        assert ("schedule", "zrem") in n6 and ("active", "del") in n6
    finally:
        c4.call("CONFIG", "SET", "notify-keyspace-events", old)
