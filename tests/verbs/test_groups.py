"""Groups on the wire: lanes, the ring, limits, pause, rates; key by key, both wires."""

from __future__ import annotations

import pytest

from echomq.core import errors, ids, keyspace
from echomq.verbs import groups, jobs
from echomq.verbs.groups import GroupStats
from tests.support.clients import server_ms


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def ring(raw, queue) -> list[str]:
    return [m.decode() for m in raw.zrange(k(queue, "ring"), 0, -1)]


def test_a_grouped_job_puts_its_group_on_the_ring_and_is_claimed(run, raw, queue):
    jid = ids.mint()
    raw.delete(k(queue, "wake"))
    run(jobs.enqueue, queue, jid, b"x", group="acme")
    assert ring(raw, queue) == ["acme"]
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]
    assert run(groups.stats, queue) == {"acme": GroupStats(1, 0, None, False)}
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid and c.token == 1
    assert ring(raw, queue) == []  # its lane is empty now
    assert run(groups.stats, queue)["acme"] == GroupStats(0, 1, None, False)
    run(jobs.ack, queue, jid, c.token)
    assert run(groups.stats, queue)["acme"] == GroupStats(0, 0, None, False)


def test_claims_alternate_flat_and_groups_round_robin(run, queue):
    a = [ids.mint() for _ in range(4)]
    b = [ids.mint() for _ in range(2)]
    c = [ids.mint()]
    flat = [ids.mint() for _ in range(2)]
    for jid in a:
        run(jobs.enqueue, queue, jid, b"a", group="A")
    for jid in b:
        run(jobs.enqueue, queue, jid, b"b", group="B")
    run(jobs.enqueue, queue, c[0], b"c", group="C")
    run(jobs.enqueue_many, queue, [(j, b"f") for j in flat])
    got = [cl.payload.decode() for cl in run(jobs.claim_many, queue, 60_000, 20)]
    # flat and the ring take turns; within the ring A, B, C rotate; then what is left
    assert got == ["f", "a", "f", "b", "c", "a", "b", "a", "a"]
    assert run(jobs.claim, queue, 60_000) is None


def test_the_turn_survives_single_claims(run, queue):
    for _ in range(3):
        run(jobs.enqueue, queue, ids.mint(), b"g", group="G")
        run(jobs.enqueue, queue, ids.mint(), b"f")
    got = [run(jobs.claim, queue, 60_000).payload for _ in range(6)]
    assert sorted(got[:2]) == [b"f", b"g"] and sorted(got[2:4]) == [b"f", b"g"]


def test_a_limit_takes_the_group_off_the_ring_until_a_job_leaves(run, raw, queue):
    run(groups.set_limit, queue, "L", 1)
    minted = [ids.mint() for _ in range(3)]
    for jid in minted:
        run(jobs.enqueue, queue, jid, b"x", group="L")
    first = run(jobs.claim_many, queue, 60_000, 5)
    assert [c.id for c in first] == minted[:1]
    assert ring(raw, queue) == []
    assert run(groups.stats, queue)["L"] == GroupStats(2, 1, 1, False)
    raw.delete(k(queue, "wake"))
    run(jobs.ack, queue, first[0].id, first[0].token)
    assert ring(raw, queue) == ["L"]
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]
    run(groups.set_limit, queue, "L", None)
    assert [c.id for c in run(jobs.claim_many, queue, 60_000, 5)] == minted[1:]


@pytest.mark.parametrize("leave", ["ack", "ack_many", "retry", "dead", "delay", "reap",
                                   "finish_cancelled", "rate_limited"])
def test_every_way_out_of_active_lowers_the_group_count(run, raw, queue, leave):
    run(groups.set_limit, queue, "G", 1)
    jid, nxt = ids.mint(), ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="G")
    run(jobs.enqueue, queue, nxt, b"y", group="G")
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid and ring(raw, queue) == []
    if leave == "ack":
        run(jobs.ack, queue, jid, c.token)
    elif leave == "ack_many":
        run(jobs.ack_many, queue, [(jid, c.token)])
    elif leave == "retry":
        assert run(jobs.retry, queue, jid, c.token, 60_000, 5, "e") == "retrying"
    elif leave == "dead":
        assert run(jobs.retry, queue, jid, c.token, 0, 1, "e") == "dead"
    elif leave == "delay":
        run(jobs.delay, queue, jid, c.token, 60_000)  # wire 6: refused natively, falls back
        assert raw.hget(keyspace.job_key(queue, jid), "state") == b"scheduled"
    elif leave == "reap":
        raw.zadd(k(queue, "active"), {jid: 1})
        assert run(jobs.reap, queue, 10) == 1
    elif leave == "finish_cancelled":
        run(jobs.cancel, queue, jid)
        run(jobs.finish_cancelled, queue, jid, c.token)
    else:
        run(jobs.rate_limited, queue, jid, c.token, 1)
    assert raw.hget(keyspace.group_key(queue, "G"), "active") == b"0"
    if leave != "rate_limited":
        assert ring(raw, queue) == ["G"]
        got = run(jobs.claim, queue, 60_000)
        assert got.id == (jid if leave == "reap" else nxt)


def test_a_paused_group_keeps_and_receives_jobs_but_releases_none(run, raw, queue):
    now = server_ms(raw)
    a, b = ids.mint(), ids.mint()
    run(jobs.enqueue, queue, a, b"x", group="P")
    run(groups.pause, queue, "P")
    assert ring(raw, queue) == []
    run(jobs.enqueue_at, queue, b, b"y", now - 1, group="P")
    assert run(jobs.promote, queue, 10, native=False) == 1
    assert raw.zcard(keyspace.lane_key(queue, "P")) == 2
    assert run(jobs.claim, queue, 60_000) is None
    assert run(groups.stats, queue)["P"] == GroupStats(2, 0, None, True)
    raw.delete(k(queue, "wake"))
    run(groups.resume, queue, "P")
    assert ring(raw, queue) == ["P"]
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]
    assert [c.id for c in run(jobs.claim_many, queue, 60_000, 5)] == [a, b]


def test_promote_wakes_the_ring_for_a_grouped_job(run_script, raw, queue):
    jid = ids.mint()
    run_script(jobs.enqueue_at, queue, jid, b"x", 0, group="W", priority=2)
    assert ring(raw, queue) == []
    raw.delete(k(queue, "wake"))
    assert run_script(jobs.promote, queue, 10) == 1
    assert ring(raw, queue) == ["W"]
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]
    assert raw.zscore(keyspace.lane_key(queue, "W"), jid) == 2.0


def test_native_promote_still_refuses_a_grouped_row(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue_at, queue, jid, b"x", 0, group="N")
    if run.wire == 6:
        with pytest.raises(errors.StateError, match=r"^EMQSTATE promote lane not native$"):
            run(jobs.promote, queue, 10)
        assert raw.zscore(k(queue, "schedule"), jid) == 0.0  # the refusal wrote nothing
    assert run(jobs.promote, queue, 10, native=False) == 1
    assert ring(raw, queue) == ["N"]


def test_a_group_rate_is_a_sliding_window_on_the_server_clock(run, raw, queue):
    run(groups.set_rate, queue, "R", 2, 60_000)
    minted = [ids.mint() for _ in range(3)]
    for jid in minted:
        run(jobs.enqueue, queue, jid, b"x", group="R")
    before = server_ms(raw)
    got = run(jobs.claim_many, queue, 60_000, 5)
    assert [c.id for c in got] == minted[:2]
    reopen = raw.zscore(k(queue, "gwait"), "R")
    assert before + 60_000 <= reopen <= server_ms(raw) + 60_000
    assert ring(raw, queue) == []
    assert 55_000 < run(jobs.next_due_ms, queue) <= 60_000
    assert run(jobs.claim, queue, 60_000) is None
    stats = run(groups.stats, queue)["R"]
    assert (stats.rate_max, stats.rate_per_ms) == (2, 60_000)
    # the window moves on: the starts age out and the block reopens
    log = keyspace.group_key(queue, "R") + ":starts"
    raw.zadd(log, {m: 1 for m in raw.zrange(log, 0, -1)})
    raw.zadd(k(queue, "gwait"), {"R": 1})
    assert [c.id for c in run(jobs.claim_many, queue, 60_000, 5)] == minted[2:]
    run(groups.clear_rate, queue, "R")
    assert not raw.exists(log)


def test_a_queue_rate_caps_every_claim(run, raw, queue):
    run(jobs.set_rate, queue, 3, 60_000)
    minted = [ids.mint() for _ in range(5)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in minted[:3]])
    run(jobs.enqueue, queue, minted[3], b"x", group="Q")
    run(jobs.enqueue, queue, minted[4], b"x", group="Q")
    assert len(run(jobs.claim_many, queue, 60_000, 10)) == 3
    assert run(jobs.claim, queue, 60_000) is None
    assert raw.hget(k(queue, "starts:n"), "total") == b"3"  # one ms bucket holding 3 starts
    assert 55_000 < run(jobs.next_due_ms, queue) <= 60_000
    run(jobs.clear_rate, queue)
    assert len(run(jobs.claim_many, queue, 60_000, 10)) == 2


def test_rate_limited_gives_the_job_back_and_blocks_its_group_or_queue(run, raw, queue):
    g, f, other = ids.mint(), ids.mint(), ids.mint()
    run(jobs.enqueue, queue, g, b"x", group="T", priority=3)
    cg = run(jobs.claim, queue, 60_000)
    assert cg.id == g
    before = server_ms(raw)
    run(jobs.rate_limited, queue, g, cg.token, 30_000)
    row = raw.hgetall(keyspace.job_key(queue, g))
    assert row[b"attempts"] == b"0" and row[b"state"] == b"pending"
    assert raw.zscore(keyspace.lane_key(queue, "T"), g) == 3.0
    assert before + 30_000 <= raw.zscore(k(queue, "gwait"), "T") <= server_ms(raw) + 30_000
    assert ring(raw, queue) == []
    run(jobs.enqueue, queue, f, b"y")
    cf = run(jobs.claim, queue, 60_000)
    assert cf.id == f  # only the group is blocked
    run(jobs.rate_limited, queue, f, cf.token, 20_000)
    assert 0 < raw.pttl(k(queue, "blocked_until")) <= 20_000
    run(jobs.enqueue, queue, other, b"z")
    assert run(jobs.claim, queue, 60_000) is None  # the whole queue waits
    assert 15_000 < run(jobs.next_due_ms, queue) <= 20_000
    raw.delete(k(queue, "blocked_until"))
    raw.zadd(k(queue, "gwait"), {"T": 1})
    got = {c.id: c.token for c in run(jobs.claim_many, queue, 60_000, 5)}
    assert got == {g: 1, f: 1, other: 1}  # no attempt was spent


def test_rate_limited_refusals_write_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE rate_limited token mismatch$"):
        run(jobs.rate_limited, queue, jid, c.token + 1, 10)
    with pytest.raises(ValueError):
        run(jobs.rate_limited, queue, jid, c.token, 0)
    assert snap(queue) == before


@pytest.mark.parametrize(("call", "exc"), [
    (lambda run, q: run(groups.set_limit, q, "g", 0), ValueError),
    (lambda run, q: run(groups.set_limit, q, "g", 1.5), TypeError),
    (lambda run, q: run(groups.pause, q, "a{b"), ValueError),
    (lambda run, q: run(groups.set_rate, q, "g", 0, 10), ValueError),
    (lambda run, q: run(groups.set_rate, q, "g", 1, 0), ValueError),
    (lambda run, q: run(jobs.set_rate, q, 1, -5), ValueError),
    (lambda run, q: run(groups.resume, q, ""), ValueError),
])
def test_group_control_guards_write_nothing(run, queue, snap, call, exc):
    with pytest.raises(exc):
        call(run, queue)
    assert snap(queue) == {}


def test_cancel_of_a_waiting_grouped_job_updates_the_ring(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="C")
    assert ring(raw, queue) == ["C"]
    assert run(jobs.cancel, queue, jid) == "cancelled"
    assert ring(raw, queue) == []
    assert run(groups.stats, queue)["C"] == GroupStats(0, 0, None, False)


def test_a_paused_queue_still_moves_its_windows_on(run, raw, queue):
    # next_due_ms must not keep answering "due" for a window that reopened while paused
    run(jobs.set_rate, queue, 1, 60_000)
    run(jobs.enqueue_many, queue, [(ids.mint(), b"x"), (ids.mint(), b"y")])
    assert len(run(jobs.claim_many, queue, 60_000, 5)) == 1
    assert run(jobs.next_due_ms, queue) > 55_000
    run(jobs.pause, queue)
    log = k(queue, "starts")
    raw.zadd(log, {m: 1 for m in raw.zrange(log, 0, -1)})  # the start ages out
    assert run(jobs.next_due_ms, queue) <= 0
    assert run(jobs.claim, queue, 60_000) is None  # paused: nothing handed out...
    assert run(jobs.next_due_ms, queue) is None  # ...but the window moved on
