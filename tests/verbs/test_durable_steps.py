"""Durable steps, the journal and the sleep (DESIGN §3h; ``echomq.verbs.durable``): a step's
result is recorded once on the job's row, fenced by its token; the journal reads back in
order in one call and dies with the row; a sleep sends the job to the schedule on the
SERVER clock without spending an attempt, and reads done once its wake has come. Both
connectors and wires, single server and cluster; every refusal writes nothing."""

from __future__ import annotations

import time

import pytest

from echomq.core import errors, ids, keyspace, states
from echomq.verbs import durable, jobs, retention
from echomq.verbs.durable import StepState
from tests.support.clients import server_ms
from tests.support.durable import held

pytestmark = pytest.mark.topologies


def row(raw, queue, jid):
    return {k.decode(): v for k, v in raw.hgetall(keyspace.job_key(queue, jid)).items()}


def test_a_step_is_recorded_once_and_the_first_result_wins(run, raw, queue):
    jid, token = held(run, queue)
    before = server_ms(raw)
    got = run(durable.record, queue, jid, token, "fetch", b'{"id": 7}')
    assert got.fresh and got.step.state == "done" and got.step.result == b'{"id": 7}'
    assert before <= got.step.at_ms <= server_ms(raw)
    again = run(durable.record, queue, jid, token, "fetch", b'{"id": 8}')
    assert not again.fresh and again.step == got.step
    assert [s.as_dict() for s in run(durable.steps, queue, jid)] == [
        {"name": "fetch", "state": "done", "at_ms": got.step.at_ms}]
    # the job is still in hand, and the ack that ends it is the usual one
    assert row(raw, queue, jid)["state"] == b"active"
    run(jobs.ack, queue, jid, token)


def test_steps_read_back_in_the_order_they_were_recorded(run, queue):
    jid, token = held(run, queue)
    names = ["b", "a", "step:with:colons", "z", "ü-name", "1"]
    for i, name in enumerate(names):
        run(durable.record, queue, jid, token, name, str(i).encode())
    got = run(durable.steps, queue, jid)
    assert [s.name for s in got] == names
    assert [s.result for s in got] == [str(i).encode() for i in range(len(names))]
    assert all(s.state is StepState.DONE for s in got)
    assert [s.at_ms for s in got] == sorted(s.at_ms for s in got)
    assert run(durable.steps, queue, ids.mint()) == []


def test_a_later_run_reads_the_steps_a_failed_run_recorded(run, queue):
    jid, token = held(run, queue)
    run(durable.record, queue, jid, token, "charge", b'"ch_1"')
    assert run(jobs.retry, queue, jid, token, 0, 5, "boom") == "retrying"
    run(jobs.promote, queue, 10)
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid and c.token == token + 1
    got = run(durable.record, queue, jid, c.token, "charge", b'"ch_2"')
    assert not got.fresh and got.step.result == b'"ch_1"'


def test_a_stale_holder_records_nothing(run, snap, raw, queue):
    jid, token = held(run, queue)
    run(durable.record, queue, jid, token, "one", b"1")
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE step token mismatch$"):
        run(durable.record, queue, jid, token + 1, "two", b"2")
    with pytest.raises(errors.KindError):
        run(durable.record, queue, "NOPE" + jid[4:], token, "two", b"2")
    with pytest.raises(errors.GoneError):
        run(durable.record, queue, ids.mint(), token, "two", b"2")
    assert snap(queue) == before
    raw.zrem(keyspace.queue_key(queue, "active"), jid)  # the lease is gone
    before = snap(queue)
    with pytest.raises(errors.StateError, match=r"^EMQSTATE step not active$"):
        run(durable.record, queue, jid, token, "two", b"2")
    assert snap(queue) == before


@pytest.mark.parametrize("bad", ["", 7, "x" * 201])
def test_a_bad_step_name_is_refused_before_any_io(run, queue, bad):
    with pytest.raises((TypeError, ValueError)):
        run(durable.record, queue, ids.mint(), 1, bad, b"1")


def test_the_journal_dies_with_its_row(run, raw, queue):
    # an ack that keeps nothing deletes the row and its steps in one DEL (EMQ.ACK too)
    jid, token = held(run, queue)
    run(durable.record, queue, jid, token, "s", b"1")
    run(jobs.ack, queue, jid, token, keep=False)
    assert raw.exists(keyspace.job_key(queue, jid)) == 0
    assert run(durable.steps, queue, jid) == []
    # a kept one is trimmed by retention, steps and all
    jid, token = held(run, queue)
    run(durable.record, queue, jid, token, "s", b"1")
    run(jobs.ack, queue, jid, token, keep=True)
    assert [s.name for s in run(durable.steps, queue, jid)] == ["s"]
    assert run(retention.trim, queue, "completed", 0, None) == 1
    assert run(durable.steps, queue, jid) == []
    assert not [k for k in raw.scan_iter(match=f"emq:{{{queue}}}:*{jid}*")]


def test_sleep_sends_the_job_to_the_schedule_without_spending_an_attempt(run, raw, queue):
    jid, token = held(run, queue)
    before = server_ms(raw)
    got = run(durable.sleep, queue, jid, token, "cool-off", 60_000)
    after = server_ms(raw)
    assert got.fresh and got.step.state == "sleeping"
    assert before + 60_000 <= got.step.until_ms <= after + 60_000
    r = row(raw, queue, jid)
    assert r["state"] == b"scheduled" and r["sleeping"] == b"cool-off"
    assert r["attempts"] == str(token).encode() and r["delays"] == b"1"
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), jid) == got.step.until_ms
    assert raw.zscore(keyspace.queue_key(queue, "active"), jid) is None
    hold = run(jobs.why, queue, jid)
    assert hold.control == "sleep" and hold.until_ms == got.step.until_ms
    assert hold.words.startswith("sleeping in step cool-off until ")
    assert [s.state for s in run(durable.steps, queue, jid)] == ["sleeping"]
    # the token is spent: the holder that slept can record nothing more
    with pytest.raises(errors.StateError):
        run(durable.record, queue, jid, token, "after", b"1")


def test_after_its_wake_the_sleep_reads_done_and_the_run_goes_on(run, raw, queue):
    jid, token = held(run, queue)
    slept = run(durable.sleep, queue, jid, token, "nap", 30)
    while server_ms(raw) < slept.step.until_ms:
        time.sleep(0.01)
    # the listing says done as soon as the SERVER clock passes the wake
    [listed] = run(durable.steps, queue, jid)
    assert listed.state == "done" and listed.at_ms == slept.step.until_ms
    assert run(jobs.promote, queue, 10) == 1
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid and c.token == token + 1
    got = run(durable.sleep, queue, jid, c.token, "nap", 30)
    assert not got.fresh and got.step.state == "done" and got.step.at_ms == slept.step.until_ms
    r = row(raw, queue, jid)
    assert r["state"] == b"active" and "sleeping" not in r
    assert run(jobs.tally, queue, jid).failures == 0
    assert run(durable.steps, queue, jid)[0].state == "done"
    run(jobs.ack, queue, jid, c.token)


def test_a_sleeper_handed_out_early_goes_back_for_the_time_left(run, raw, queue):
    jid, token = held(run, queue)
    slept = run(durable.sleep, queue, jid, token, "nap", 60_000)
    raw.zadd(keyspace.queue_key(queue, "schedule"), {jid: 0})  # an operator's run-now
    run(jobs.promote, queue, 10)
    c = run(jobs.claim, queue, 60_000)
    assert c.id == jid
    got = run(durable.sleep, queue, jid, c.token, "nap", 5)
    assert not got.fresh and got.step.state == "sleeping"
    assert got.step.until_ms == slept.step.until_ms
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), jid) == slept.step.until_ms
    assert row(raw, queue, jid)["delays"] == b"2"


def test_sleep_at_an_absolute_instant_and_its_refusals(run, snap, raw, queue):
    jid, token = held(run, queue)
    with pytest.raises(ValueError):
        run(durable.sleep, queue, jid, token, "nap", -1)
    with pytest.raises(ValueError):
        run(durable.sleep, queue, jid, token, "nap", 5, mode="soon")
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE sleep token mismatch$"):
        run(durable.sleep, queue, jid, token + 1, "nap", 5)
    assert snap(queue) == before
    at = server_ms(raw) + 3_600_000
    got = run(durable.sleep, queue, jid, token, "nap", at, mode="at")
    assert got.step.until_ms == at
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), jid) == at


def test_a_grouped_sleeper_frees_its_groups_slot(run, raw, queue):
    jid, token = held(run, queue, group="tenant-1")
    meta = keyspace.group_key(queue, "tenant-1")
    assert raw.hget(meta, "active") == b"1"
    run(durable.sleep, queue, jid, token, "nap", 60_000)
    assert raw.hget(meta, "active") == b"0"


def test_cancel_of_a_sleeping_job_ends_it_and_its_step(run, raw, queue):
    jid, token = held(run, queue)
    run(durable.sleep, queue, jid, token, "nap", 60_000)
    assert run(jobs.cancel, queue, jid) == "cancelled"
    r = row(raw, queue, jid)
    assert r["state"] == b"cancelled" and "sleeping" not in r
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), jid) is None
    assert [s.state for s in run(durable.steps, queue, jid)] == ["cancelled"]


def test_the_state_table_rows_of_record_and_sleep_hold(run, raw, queue):
    rows = {(t.verb, t.target) for t in states.TRANSITIONS if t.verb in ("record", "sleep")}
    assert rows == {("record", "active"), ("sleep", "scheduled"), ("sleep", "active"),
                    ("sleep", "cancelled")}
    jid, token = held(run, queue)
    run(durable.record, queue, jid, token, "s", b"1")
    assert row(raw, queue, jid)["state"] == b"active"
    run(durable.sleep, queue, jid, token, "nap", 60_000)
    assert row(raw, queue, jid)["state"] == b"scheduled"


def test_a_binary_step_result_reads_back_as_bytes(run, queue):
    """A result may be a codec's binary (Zlib): the journal and the row read keep it bytes."""
    jid, token = held(run, queue)
    blob = bytes(range(256))
    run(durable.record, queue, jid, token, "packed", blob)
    assert run(durable.steps, queue, jid)[0].result == blob
    assert run(jobs.get, queue, jid)["out:packed"] == blob


def test_a_job_whose_cancel_was_requested_ends_instead_of_sleeping(run, raw, queue):
    jid, token = held(run, queue)
    assert run(jobs.cancel, queue, jid) == "requested"
    got = run(durable.sleep, queue, jid, token, "nap", 60_000)
    assert got.step.state == "cancelled"
    assert row(raw, queue, jid)["state"] == b"cancelled"
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), jid) is None
    assert raw.zscore(keyspace.queue_key(queue, "cancelled"), jid) is not None
    assert run(durable.steps, queue, jid) == []
