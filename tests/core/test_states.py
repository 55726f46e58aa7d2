"""The state table (echomq.core.states) is checked against the real transitions."""

from __future__ import annotations

import pytest

from echomq.core import ids, keyspace, states
from echomq.verbs import jobs, repeat
from tests.support.clients import server_ms
from tests.support.paths import ROOT

VERBS = {t.verb for t in states.TRANSITIONS}


def place(conn, raw, queue: str, state: str) -> tuple[str, int]:
    """Put a fresh job in ``state``; returns (id, token)."""
    jid = ids.mint()
    if state == "scheduled":
        jobs.enqueue_at(conn, queue, jid, b"x", 0)
        return jid, 0
    jobs.enqueue(conn, queue, jid, b"x")
    if state == "pending":
        return jid, 0
    c = jobs.claim(conn, queue, 60_000)
    assert c is not None and c.id == jid
    if state == "active":
        return jid, c.token
    if state == "dead":
        assert jobs.retry(conn, queue, jid, c.token, 0, 1, "x") == "dead"
        return jid, c.token
    raise AssertionError(state)


def act(conn, raw, queue: str, t: states.Transition, jid: str, token: int) -> None:
    if t.target == "cancelled" and t.verb in ("claim", "retry", "reap"):
        # the row a cancel request left (jobs.cancel of a waiting job ends it at once)
        raw.hset(keyspace.job_key(queue, jid), "cancel", "1")
    if t.verb == "claim" and t.target == "dead":  # a row the claim cannot run
        raw.hdel(keyspace.job_key(queue, jid), "payload")
    if t.target == "expired":
        # a deadline long past, as an admission with expires writes it
        raw.hset(keyspace.job_key(queue, jid), "expires", "1")
        raw.zadd(keyspace.queue_key(queue, "deadlines"), {jid: 1})
    if t.verb == "cancel":
        assert jobs.cancel(conn, queue, jid) == ("requested" if t.target == "active"
                                                 else "cancelled")
    elif t.verb == "finish_cancelled":
        jobs.finish_cancelled(conn, queue, jid, token)
    elif t.verb == "promote":
        jobs.promote(conn, queue, 10)
    elif t.verb == "claim":
        jobs.claim(conn, queue, 60_000)
    elif t.verb == "extend":
        jobs.extend(conn, queue, jid, token, 60_000)
    elif t.verb == "ack":
        jobs.ack(conn, queue, jid, token)
    elif t.verb == "retry":
        jobs.retry(conn, queue, jid, token, 0, 1 if t.target == "dead" else 5, "e")
    elif t.verb == "delay":
        jobs.delay(conn, queue, jid, token, 10)
    elif t.verb == "reap":
        raw.zadd(keyspace.queue_key(queue, "active"), {jid: 1})
        jobs.reap(conn, queue, 10, max_stalled=0 if t.target == "dead" else 2)
    elif t.verb == "expire":
        assert jobs.expire(conn, queue, 10) == 1
    elif t.verb == "debounce":
        raw.hset(keyspace.queue_key(queue, "debounce:k"), mapping={"id": jid, "first": 0})
        got = jobs.debounce(conn, queue, ids.mint(), b"y", "k", 60_000)
        assert got.id == jid and got.outcome == "debounced"
    else:
        raise AssertionError(t.verb)


MOVING = [t for t in states.TRANSITIONS if t.source and t.verb in
          {"promote", "claim", "extend", "ack", "retry", "delay", "reap", "cancel",
           "finish_cancelled", "expire", "debounce"}]


@pytest.mark.parametrize("t", MOVING, ids=lambda t: f"{t.verb}:{t.source[0]}->{t.target}")
def test_each_row_of_the_table_holds(conn, raw, queue, t):
    jid, token = place(conn, raw, queue, t.source[0])
    act(conn, raw, queue, t, jid, token)
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"].decode() == t.target
    home = keyspace.queue_key(queue, states.SET_OF[t.target])
    assert raw.zscore(home, jid) is not None
    for other in set(states.SET_OF.values()) - {states.SET_OF[t.target]}:
        assert raw.zscore(keyspace.queue_key(queue, other), jid) is None


def test_admissions_land_where_the_table_says(conn, raw, queue):
    for t in states.TRANSITIONS:
        if t.source:
            continue
        jid = ids.mint()
        if t.verb == "enqueue":
            jobs.enqueue(conn, queue, jid, b"x")
        elif t.verb == "fire":
            repeat.register(conn, queue, "tick", 60_000, b"tpl")
            (entry,) = repeat.due(conn, queue)
            fired = repeat.fire(conn, queue, entry)
            assert fired.outcome == "fired"
            jid = fired.ids[0]
        elif t.verb == "flow_admit":
            from echomq.verbs import flows
            flows.admit(conn, flows.Node(queue, jid, b"p", children=(
                flows.Node(queue, ids.mint(), b"c"),)))
        elif t.verb == "debounce":
            jid = jobs.debounce(conn, queue, jid, b"x", "key", 60_000).id
        elif t.verb == "enqueue_at":
            jobs.enqueue_at(conn, queue, jid, b"x", server_ms(raw) + 60_000)
        else:
            jobs.enqueue_in(conn, queue, jid, b"x", 60_000)
        assert raw.hget(keyspace.job_key(queue, jid), "state").decode() == t.target


def test_every_state_has_a_set_and_the_markdown_lists_every_verb():
    assert set(states.SET_OF) == set(states.STATES)
    for t in states.TRANSITIONS:
        assert set(t.source) <= set(states.STATES)
        assert t.target in (*states.STATES, "(deleted)")
    md = states.table_markdown()
    for verb in VERBS:
        assert f"`{verb}`" in md


def test_docs_table_is_the_generated_one():

    readme = (ROOT / "docs" / "reference" / "states.md").read_text()
    block = readme.split("<!-- states-table:begin -->\n", 1)[1]
    block = block.split("\n<!-- states-table:end -->")[0]
    assert block == states.table_markdown()
