"""Durable waits and signals (DESIGN §3h; ``echomq.verbs.durable``): a job parks in state
``waiting`` on a signal key; a signal resumes every waiter on any queue with its payload as
the step's result; a signal sent first is kept for late waiters; the timeout (SERVER clock)
makes the job claimable with its step timed out; cancel ends a waiting job. Both connectors
and wires, single server and cluster; every refusal writes nothing. The races:
test_durable_race.py."""

from __future__ import annotations

import time

import pytest

from echomq.core import errors, ids, keyspace, states
from echomq.verbs import doctor, durable, jobs
from tests.support.clients import server_ms
from tests.support.durable import held, past_registrations, sig, state, wait_keys

pytestmark = pytest.mark.topologies


def test_a_wait_parks_the_job_and_a_signal_resumes_it(run, raw, queue):
    key = sig()
    jid, token = held(run, queue)
    before = server_ms(raw)
    got = run(durable.wait_for, queue, jid, token, "approve", key, 60_000)
    assert got.fresh and got.step.state == "waiting"
    assert before + 60_000 <= got.step.until_ms <= server_ms(raw) + 60_000
    assert state(raw, queue, jid) == "waiting"
    assert wait_keys(raw, queue, jid, key) == (True, True, True)
    assert raw.zscore(keyspace.queue_key(queue, "active"), jid) is None
    assert run(jobs.counts, queue)["waiting"] == 1
    hold = run(jobs.why, queue, jid)
    assert hold.control == "signal" and hold.facts["key"] == key
    assert hold.words.startswith(f"waiting for signal {key} in step approve, times out at ")
    assert hold.until_ms == got.step.until_ms
    assert run(jobs.claim, queue, 60_000) is None  # never claimable while it waits

    assert run(durable.signal, key, b'{"ok": true}') == 1
    assert state(raw, queue, jid) == "pending"
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    assert "waiting" not in run(jobs.counts, queue)
    [step] = run(durable.steps, queue, jid)
    assert step.state == "done" and step.result == b'{"ok": true}'
    # the re-run reads the payload back, without parking
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid and c.token == token + 1
    again = run(durable.wait_for, queue, jid, c.token, "approve", key, 60_000)
    assert not again.fresh and again.step.state == "done"
    assert again.step.result == b'{"ok": true}'
    assert state(raw, queue, jid) == "active"
    tally = run(jobs.tally, queue, jid)
    assert (tally.failures, tally.delays) == (0, 1)  # the wait spent no attempt


def test_a_signal_sent_before_the_wait_is_kept_and_taken_at_once(run, raw, queue):
    key = sig()
    assert run(durable.signal, key, b'"yes"', ttl_ms=60_000) == 0
    assert run(durable.stored, key) == b'"yes"'
    assert 0 < raw.pttl(keyspace.signal_key(key, "value")) <= 60_000
    jid, token = held(run, queue)
    got = run(durable.wait_for, queue, jid, token, "approve", key, 60_000)
    assert got.fresh and got.step.state == "done" and got.step.result == b'"yes"'
    assert state(raw, queue, jid) == "active"  # not parked: the handler runs on
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    # it registered before it read the store: an entry the next signal reads and drops
    # (one stored in a later ms: an entry of the store's own ms is kept, as a tie)
    assert raw.zscore(keyspace.signal_key(key, "queues"), queue) is not None
    past_registrations(raw, key)
    assert run(durable.signal, key, b'"again"') == 0
    assert raw.exists(keyspace.signal_key(key, "queues")) == 0


def test_one_signal_resumes_every_waiter_on_every_queue(run, raw, queue):
    key = sig()
    queues = [queue, queue + "-b", queue + "-c"]
    waiting = []
    for q in queues:
        for _ in range(2):
            jid, token = held(run, q)
            run(durable.wait_for, q, jid, token, "approve", key)
            waiting.append((q, jid))
    other_key = sig()
    jid, token = held(run, queue)
    run(durable.wait_for, queue, jid, token, "approve", other_key)
    past_registrations(raw, key)
    assert run(durable.signal, key, b"1") == 6
    assert {state(raw, q, j) for q, j in waiting} == {"pending"}
    assert state(raw, queue, jid) == "waiting"  # another key's waiter stays
    assert run(durable.signal, key, b"2") == 0  # a signal resumes a job once
    assert raw.exists(keyspace.signal_key(key, "queues")) == 0


def test_a_resumed_job_keeps_its_priority_and_its_groups_lane(run, raw, queue):
    key = sig()
    jid, token = held(run, queue, group="tenant-1", priority=5)
    meta = keyspace.group_key(queue, "tenant-1")
    run(durable.wait_for, queue, jid, token, "approve", key)
    assert raw.hget(meta, "active") == b"0"  # the wait holds no slot of its group
    assert run(durable.signal, key) == 1
    assert raw.zscore(keyspace.lane_key(queue, "tenant-1"), jid) == 5
    c = run(jobs.claim, queue, 60_000)
    assert c is not None and c.id == jid


def test_at_the_timeout_the_job_is_claimable_with_its_step_timed_out(run, raw, queue):
    key = sig()
    jid, token = held(run, queue)
    got = run(durable.wait_for, queue, jid, token, "approve", key, 20)
    while server_ms(raw) < got.step.until_ms:
        time.sleep(0.01)
    assert run(jobs.next_due, queue).deadline_ms <= 0  # what makes a beat run the sweep
    assert run(jobs.expire, queue, 10) == 1
    assert state(raw, queue, jid) == "pending"
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    [step] = run(durable.steps, queue, jid)
    assert step.state == "timed_out" and step.at_ms >= got.step.until_ms
    assert run(durable.signal, key) == 0  # too late: the timeout came first
    c = run(jobs.claim, queue, 60_000)
    again = run(durable.wait_for, queue, jid, c.token, "approve", key, 20)
    assert not again.fresh and again.step.state == "timed_out"
    assert state(raw, queue, jid) == "active"


def test_a_wait_without_a_timeout_is_not_swept(run, raw, queue):
    key = sig()
    jid, token = held(run, queue)
    got = run(durable.wait_for, queue, jid, token, "approve", key)
    assert got.step.until_ms is None
    assert wait_keys(raw, queue, jid, key) == (True, False, True)
    assert run(jobs.why, queue, jid).words == (f"waiting for signal {key} in step approve, "
                                               "no timeout")
    assert run(jobs.expire, queue, 10) == 0 and state(raw, queue, jid) == "waiting"


def test_cancel_of_a_waiting_job_ends_it_everywhere(run, raw, queue):
    key = sig()
    jid, token = held(run, queue)
    run(durable.wait_for, queue, jid, token, "approve", key, 60_000)
    assert run(jobs.cancel, queue, jid) == "cancelled"
    assert state(raw, queue, jid) == "cancelled"
    assert raw.zscore(keyspace.queue_key(queue, "cancelled"), jid) is not None
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    assert [s.state for s in run(durable.steps, queue, jid)] == ["cancelled"]
    assert run(durable.signal, key) == 0


def test_refusals_write_nothing(run, snap, raw, queue):
    key = sig()
    jid, token = held(run, queue)
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE wait token mismatch$"):
        run(durable.wait_for, queue, jid, token + 1, "approve", key, 60_000)
    with pytest.raises(errors.GoneError):
        run(durable.wait_for, queue, ids.mint(), token, "approve", key, 60_000)
    assert snap(queue) == before
    assert raw.exists(keyspace.signal_key(key, "queues")) == 0
    for bad in ("", "a{b}", "x" * 201):
        with pytest.raises(ValueError):
            run(durable.wait_for, queue, jid, token, "approve", bad)
        with pytest.raises(ValueError):
            run(durable.signal, bad)
    with pytest.raises(ValueError):
        run(durable.wait_for, queue, jid, token, "approve", key, 0)
    with pytest.raises(ValueError):
        run(durable.signal, key, b"1", ttl_ms=0)
    assert snap(queue) == before and run(durable.stored, key) is None


def test_the_doctor_finds_a_waiting_job_at_home(run, queue):
    jid, token = held(run, queue)
    run(durable.wait_for, queue, jid, token, "approve", sig(), 60_000)
    assert run(doctor.check, queue) == []


def test_the_state_table_rows_of_the_wait_hold(run, raw, queue):
    moves = {(t.verb, t.source, t.target) for t in states.TRANSITIONS
             if t.verb in ("wait_for", "signal", "time_out")}
    assert moves == {("wait_for", ("active",), "waiting"), ("wait_for", ("active",), "active"),
                     ("wait_for", ("active",), "cancelled"), ("signal", ("waiting",), "pending"),
                     ("time_out", ("waiting",), "pending")}
    assert "waiting" in states.STATES and states.SET_OF["waiting"] == "waiting"


def test_a_waiting_job_keeps_its_unique_key(run, queue):
    """A job parked on a signal is live: its unique key refuses a second admission on both
    wires (the native ``EMQ.ENQUEUE`` counts ``waiting`` live as the script does), and the
    cancel that ends it releases the key."""
    first = ids.mint()
    assert run(jobs.admit, queue, first, b"x", unique="inv-7").outcome == "enqueued"
    c = run(jobs.claim, queue, 60_000)
    run(durable.wait_for, queue, first, c.token, "approve", sig())
    assert run(jobs.admit, queue, ids.mint(), b"y", unique="inv-7") == jobs.Admitted(
        "duplicate", first)
    assert run(jobs.admit, queue, ids.mint(), b"y", mode="in", value=5,
               unique="inv-7").outcome == "duplicate"
    assert run(jobs.cancel, queue, first) == "cancelled"
    assert run(jobs.admit, queue, ids.mint(), b"z", unique="inv-7").outcome == "enqueued"


def test_a_waiting_job_pages_and_is_deleted_with_its_journal(run, raw, queue):
    """``jobs.page(q, "waiting")`` lists it by the SERVER ms it parked; the dashboard's
    delete (the ``discard`` script) removes the row, journal and all, and what it leaves on
    the wait indexes is dropped by the next sweep or signal, which resume nothing."""
    from echomq.dashboard.insight import discard

    key = sig()
    jid, token = held(run, queue)
    got = run(durable.wait_for, queue, jid, token, "approve", key, 1)
    [entry] = run(jobs.page, queue, "waiting")
    assert entry["id"] == jid and entry["state"] == "waiting"
    assert entry["score"] == got.step.at_ms
    assert run(discard, queue, jid) is True
    assert raw.exists(keyspace.job_key(queue, jid)) == 0
    assert raw.zscore(keyspace.queue_key(queue, "waiting"), jid) is None
    while server_ms(raw) <= got.step.until_ms:
        time.sleep(0.005)
    assert run(jobs.expire, queue, 10) == 0
    assert raw.zscore(keyspace.queue_key(queue, "deadlines"), jid) is None
    assert run(durable.signal, key) == 0
    assert raw.exists(keyspace.waiters_key(queue, key)) == 0


def test_a_holder_whose_wait_reply_was_lost_reads_its_fate_settled(run, queue):
    """A parked job is a fenced outcome that landed (``jobs.fate``: settled, not moved), so a
    holder that lost the wait's reply in a restart does not run the job again."""
    jid, token = held(run, queue)
    run(durable.wait_for, queue, jid, token, "approve", sig())
    assert run(jobs.fate, queue, jid, token) == "settled"
    other, tok = held(run, queue)
    run(durable.sleep, queue, other, tok, "nap", 60_000)
    assert run(jobs.fate, queue, other, tok) == "settled"


def test_a_wait_handed_out_while_waiting_parks_again_until_its_own_timeout(run, raw, queue):
    """A job whose wait step still reads waiting but was handed out anyway (an operator moved
    it back to pending by hand): its wait parks again with the timeout it had, and once the
    signal is stored, takes it."""
    key = sig()
    jid, token = held(run, queue)
    first = run(durable.wait_for, queue, jid, token, "approve", key, 60_000)
    jk = keyspace.job_key(queue, jid)
    raw.zrem(keyspace.queue_key(queue, "waiting"), jid)
    raw.hset(jk, "state", "pending")
    raw.zadd(keyspace.queue_key(queue, "pending"), {jid: 0})
    c = run(jobs.claim, queue, 60_000)
    again = run(durable.wait_for, queue, jid, c.token, "approve", key, 5)
    assert not again.fresh and again.step.state == "waiting"
    assert again.step.until_ms == first.step.until_ms and state(raw, queue, jid) == "waiting"
    raw.zrem(keyspace.queue_key(queue, "waiting"), jid)
    raw.hset(jk, "state", "pending")
    raw.zadd(keyspace.queue_key(queue, "pending"), {jid: 0})
    raw.set(keyspace.signal_key(key, "value"), b'"ok"')
    c = run(jobs.claim, queue, 60_000)
    taken = run(durable.wait_for, queue, jid, c.token, "approve", key, 5)
    assert taken.step.state == "done" and taken.step.result == b'"ok"'
    assert state(raw, queue, jid) == "active"
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    assert raw.hget(jk, "wait_key") is None


def test_a_job_whose_cancel_was_requested_ends_instead_of_waiting(run, raw, queue):
    key = sig()
    jid, token = held(run, queue)
    assert run(jobs.cancel, queue, jid) == "requested"
    got = run(durable.wait_for, queue, jid, token, "approve", key, 60_000)
    assert got.step.state == "cancelled" and state(raw, queue, jid) == "cancelled"
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    assert run(durable.steps, queue, jid) == []
