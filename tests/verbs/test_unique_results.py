"""Unique jobs, kept results, done notification and progress (DESIGN §3b),
key by key on a real Valkey, both connectors and both wires."""

from __future__ import annotations

import threading
import time

import pytest

from echomq import Connector
from echomq.core import errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import jobs, retention
from echomq.verbs.jobs import Admitted


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def ukey(queue: str, key: str) -> str:
    return k(queue, f"unique:{key}")


def test_a_live_unique_key_refuses_and_names_its_owner(run, raw, queue, snap):
    a, b, c = ids.mint(), ids.mint(), ids.mint()
    assert run(jobs.admit, queue, a, b"x", unique="inv-42") == Admitted(Outcome.ENQUEUED, a)
    assert raw.get(ukey(queue, "inv-42")) == a.encode()
    assert raw.pttl(ukey(queue, "inv-42")) == -1  # no TTL while the owner lives
    assert raw.hget(keyspace.job_key(queue, a), "unique") == b"inv-42"
    before = snap(queue)
    assert run(jobs.admit, queue, b, b"y", unique="inv-42") == Admitted(Outcome.DUPLICATE, a)
    assert run(jobs.admit, queue, c, b"y", mode="in", value=10,
               unique="inv-42") == Admitted(Outcome.DUPLICATE, a)
    assert snap(queue) == before
    # an id that already has a row is a duplicate of itself
    assert run(jobs.admit, queue, a, b"x", unique="other") == Admitted(Outcome.DUPLICATE, a)
    assert not raw.exists(ukey(queue, "other"))


@pytest.mark.parametrize("end", ["ack", "ack_delete", "dead", "cancel_waiting",
                                 "cancel_active", "reap_dead", "ack_many"])
def test_the_ending_script_releases_the_key(run, raw, queue, end):
    jid = ids.mint()
    mode = "at" if end == "cancel_waiting" else "now"
    run(jobs.admit, queue, jid, b"x", mode=mode, value=10**12 * 4, unique="u")
    if end == "cancel_waiting":
        assert run(jobs.cancel, queue, jid) == "cancelled"
    else:
        c = run(jobs.claim, queue, 60_000)
        if end == "ack":
            run(jobs.ack, queue, jid, c.token)
        elif end == "ack_delete":
            run(jobs.ack, queue, jid, c.token, keep=False)
        elif end == "ack_many":
            assert run(jobs.ack_many, queue, [(jid, c.token)]) == [None]
        elif end == "dead":
            assert run(jobs.retry, queue, jid, c.token, 0, 1, "e") == "dead"
        elif end == "cancel_active":
            assert run(jobs.cancel, queue, jid) == "requested"
            assert raw.exists(ukey(queue, "u"))  # still running: still owned
            run(jobs.finish_cancelled, queue, jid, c.token)
        else:
            raw.zadd(k(queue, "active"), {jid: 1})
            run(jobs.reap, queue, 10, max_stalled=0)
    assert not raw.exists(ukey(queue, "u"))
    nxt = ids.mint()
    assert run(jobs.admit, queue, nxt, b"x", unique="u") == Admitted(Outcome.ENQUEUED, nxt)


def test_a_retry_keeps_the_key(run, raw, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", unique="u")
    c = run(jobs.claim, queue, 60_000)
    assert run(jobs.retry, queue, jid, c.token, 60_000, 5, "e") == "retrying"
    assert raw.get(ukey(queue, "u")) == jid.encode()
    assert run(jobs.admit, queue, ids.mint(), b"x", unique="u").outcome == "duplicate"


def test_unique_for_outlives_the_owner_then_lapses(run, raw, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", unique="u", unique_for_ms=60_000)
    until = int(raw.hget(keyspace.job_key(queue, jid), "unique_until"))
    c = run(jobs.claim, queue, 60_000)
    run(jobs.ack, queue, jid, c.token, keep=False)
    ttl = raw.pttl(ukey(queue, "u"))
    assert 0 < ttl <= 60_000
    assert abs(raw.execute_command("PEXPIRETIME", ukey(queue, "u")) - until) <= 1
    assert run(jobs.admit, queue, ids.mint(), b"x", unique="u") == Admitted(Outcome.DUPLICATE, jid)
    raw.pexpire(ukey(queue, "u"), 1)
    time.sleep(0.01)
    nxt = ids.mint()
    assert run(jobs.admit, queue, nxt, b"x", unique="u") == Admitted(Outcome.ENQUEUED, nxt)


def test_a_stale_key_is_healed(run, raw, queue):
    gone, ended = ids.mint(), ids.mint()
    raw.set(ukey(queue, "a"), gone)  # its owner row is gone (a raw delete, a lost write)
    fresh = ids.mint()
    assert run(jobs.admit, queue, fresh, b"x", unique="a") == Admitted(Outcome.ENQUEUED, fresh)
    raw.hset(keyspace.job_key(queue, ended), mapping={"state": "completed", "attempts": "1"})
    raw.set(ukey(queue, "b"), ended)  # its owner ended without releasing it
    fresh2 = ids.mint()
    assert run(jobs.admit, queue, fresh2, b"x", unique="b").id == fresh2


def test_bulk_admission_sees_an_earlier_owner_in_the_same_call(run, raw, queue):
    a, b, c = ids.mint(), ids.mint(), ids.mint()
    got = run(jobs.admit_many, queue, [
        (a, b"1", "now", 0, {"unique": "k"}),
        (b, b"2", "in", 5_000, {"unique": "k", "priority": 4}),
        (c, b"3", "at", 7, {"unique": "k2", "notify_ms": 1000}),
    ])
    assert got == [Admitted("enqueued", a), Admitted("duplicate", a), Admitted("scheduled", c)]
    assert not raw.exists(keyspace.job_key(queue, b))
    assert raw.hget(keyspace.job_key(queue, c), "notify") == b"1000"
    out = run(jobs.enqueue_many, queue, [(ids.mint(), b"x", {"unique": "k"})])
    assert out == ["duplicate"]


def test_admission_guards_write_nothing(run, queue, snap):
    for kwargs, exc in [({"unique": ""}, ValueError), ({"unique": 5}, TypeError),
                        ({"unique": "x" * 1001}, ValueError),
                        ({"unique_for_ms": 10}, ValueError),
                        ({"unique": "u", "unique_for_ms": 0}, ValueError),
                        ({"notify_ms": 0}, ValueError), ({"mode": "later"}, ValueError),
                        ({"mode": "in", "value": -1}, ValueError),
                        ({"mode": "at", "value": 1.5}, TypeError)]:
        with pytest.raises(exc):
            run(jobs.admit, queue, ids.mint(), b"x", **kwargs)
    with pytest.raises(errors.KindError):
        run(jobs.admit, queue, "NOPE", b"x", unique="u")
    assert snap(queue) == {}


def test_no_unique_key_leaks_with_retention_on(conn, raw, queue):
    minted = [ids.mint() for _ in range(40)]
    for i, jid in enumerate(minted):
        jobs.admit(conn, queue, jid, b"x", unique=f"key-{i}", unique_for_ms=None)
    held = jobs.claim_many(conn, queue, 60_000, 30)
    for i, c in enumerate(held):
        if i % 3 == 0:
            jobs.ack(conn, queue, c.id, c.token)
        elif i % 3 == 1:
            jobs.retry(conn, queue, c.id, c.token, 0, 1, "boom")
        else:
            jobs.cancel(conn, queue, c.id)
            jobs.finish_cancelled(conn, queue, c.id, c.token)
    for jid in minted[30:]:
        jobs.cancel(conn, queue, jid)
    for which in ("completed", "dead", "cancelled"):
        retention.trim(conn, queue, which, 0, None)
    assert list(raw.scan_iter(match=f"emq:{{{queue}}}:unique:*")) == []
    assert list(raw.scan_iter(match=f"emq:{{{queue}}}:job:*")) == []


# -- results ------------------------------------------------------------------------------


def test_ack_keeps_the_result_in_its_own_key(run, raw, queue):
    a, b = ids.mint(), ids.mint()
    run(jobs.enqueue_many, queue, [(a, b"x"), (b, b"y")])
    ca, cb = run(jobs.claim_many, queue, 60_000, 2)
    assert run(jobs.result, queue, a) is None
    run(jobs.ack, queue, a, ca.token, keep=False, result='{"n": 1}', keep_result_ms=60_000)
    assert not raw.exists(keyspace.job_key(queue, a))
    assert run(jobs.result, queue, a) == b'{"n": 1}'
    assert 0 < raw.pttl(k(queue, f"result:{a}")) <= 60_000
    run(jobs.ack, queue, b, cb.token)
    assert run(jobs.result, queue, b) is None


def test_result_guards_and_refusals_write_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    before = snap(queue)
    with pytest.raises(ValueError):
        run(jobs.ack, queue, jid, c.token, result="1")
    with pytest.raises(ValueError):
        run(jobs.ack, queue, jid, c.token, keep_result_ms=10)
    with pytest.raises(TypeError):
        run(jobs.ack, queue, jid, c.token, result=5, keep_result_ms=10)
    with pytest.raises(errors.StaleError):
        run(jobs.ack, queue, jid, c.token + 1, result="1", keep_result_ms=10)
    with pytest.raises(ValueError):
        run(jobs.ack_many, queue, [(jid, c.token, "1", None)])
    assert snap(queue) == before


def test_ack_many_and_ack_and_claim_carry_results(run, raw, queue):
    minted = [ids.mint() for _ in range(5)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in minted])
    held = run(jobs.claim_many, queue, 60_000, 3)
    out = run(jobs.ack_many, queue, [
        (held[0].id, held[0].token, "10", 60_000),
        (held[1].id, held[1].token),
        (held[2].id, held[2].token + 1, "12", 60_000),
    ], keep=False)
    assert out[0] is None and out[1] is None and isinstance(out[2], errors.StaleError)
    assert run(jobs.result, queue, held[0].id) == b"10"
    assert run(jobs.result, queue, held[1].id) is None
    assert run(jobs.result, queue, held[2].id) is None
    refusals, more = run(jobs.ack_and_claim, queue, [(held[2].id, held[2].token, "12", 5_000)],
                         60_000, 2)
    assert refusals == [None] and [c.id for c in more] == minted[3:]
    assert run(jobs.result, queue, held[2].id) == b"12"
    assert raw.hget(keyspace.job_key(queue, held[2].id), "state") == b"completed"


# -- done notification --------------------------------------------------------------------


def test_the_end_leaves_a_done_token_for_every_waiter(run, raw, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", notify_ms=60_000)
    assert run(jobs.wait_done, queue, jid, 0.05) is False
    c = run(jobs.claim, queue, 60_000)
    run(jobs.ack, queue, jid, c.token, keep=False, result="7", keep_result_ms=60_000)
    done = k(queue, f"done:{jid}")
    assert raw.lrange(done, 0, -1) == [b"completed"]
    assert 0 < raw.pttl(done) <= 60_000
    assert run(jobs.wait_done, queue, jid, 1) is True
    assert run(jobs.wait_done, queue, jid, 1) is True  # the token stays for the next one
    assert raw.lrange(done, 0, -1) == [b"completed"]


@pytest.mark.parametrize("end", ["dead", "cancelled"])
def test_dead_and_cancelled_ends_notify_too(conn, raw, queue, end):
    jid = ids.mint()
    jobs.admit(conn, queue, jid, b"x", notify_ms=60_000)
    if end == "cancelled":
        jobs.cancel(conn, queue, jid)
    else:
        c = jobs.claim(conn, queue, 60_000)
        jobs.retry(conn, queue, jid, c.token, 0, 1, "e")
    assert raw.lrange(k(queue, f"done:{jid}"), 0, -1) == [end.encode()]


def test_a_blocked_waiter_wakes_at_the_end(url, queue):
    conn = Connector.connect(url)
    jid = ids.mint()
    jobs.admit(conn, queue, jid, b"x", notify_ms=60_000)
    c = jobs.claim(conn, queue, 60_000)
    got: list[bool] = []
    waiter = threading.Thread(
        target=lambda: got.append(jobs.wait_done(Connector.connect(url), queue, jid, 20)))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # still blocked: the job has not ended
    jobs.ack(conn, queue, jid, c.token)
    waiter.join(10)
    assert got == [True]
    conn.close()


def test_wait_done_guards(run, queue):
    with pytest.raises(ValueError):
        run(jobs.wait_done, queue, ids.mint(), 0)
    with pytest.raises(TypeError):
        run(jobs.wait_done, queue, ids.mint(), "1")


# -- progress -----------------------------------------------------------------------------


def test_progress_is_token_fenced(run, raw, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    run(jobs.progress, queue, jid, c.token, '{"done": 3, "of": 10}')
    assert raw.hget(keyspace.job_key(queue, jid), "progress") == b'{"done": 3, "of": 10}'
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE progress token mismatch$"):
        run(jobs.progress, queue, jid, c.token + 1, "1")
    with pytest.raises(errors.GoneError):
        run(jobs.progress, queue, ids.mint(), 1, "1")
    with pytest.raises(TypeError):
        run(jobs.progress, queue, jid, c.token, 5)
    assert snap(queue) == before
    run(jobs.ack, queue, jid, c.token)
    with pytest.raises(errors.StateError, match=r"^EMQSTATE progress not active$"):
        run(jobs.progress, queue, jid, c.token, "2")
