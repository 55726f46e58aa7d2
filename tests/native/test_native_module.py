"""Every reply and refusal of the EMQ module, on a module-loaded server.

Each refusal is checked to write nothing, key by key: a snapshot of every key of the
queue (type and content) before and after must be equal. Commands are sent raw, so the
texts checked are the server's exactly.
"""

from __future__ import annotations

import pytest
import valkey

from echomq.embedded.server import EmbeddedServer
from tests.support.clients import server_ms
from tests.support.native import (
    FAR,
    J1,
    J2,
    J3,
    WRONGTYPE,
    delay,
    held,
    k,
    promote,
    refused,
    reschedule,
    schedule,
    send,
    snapshot,
)

# The refusals every command shares (a foreign id, the mode, the due, the shape, a set of
# the wrong type, the key positions) are parametrized across the commands in
# test_native_refusals.py; what is particular to one command stays here.

# -- EMQ.SCHEDULE ---------------------------------------------------------------------------


def test_schedule_at_admits_with_the_literal_score(r: valkey.Valkey, q: str) -> None:
    assert send(r, *schedule(q, J1, b"a\x00b", "at", 1234)) == 1
    assert snapshot(r, q) == {
        "job:" + J1: ("hash", {"state": b"scheduled", "attempts": b"0", "payload": b"a\x00b"}),
        "schedule": ("zset", {J1: 1234.0}),
        "stats": ("hash", {"enqueued": b"1"}),  # the queue's counters, as the script keeps
        "due": ("list", [b"1"]),  # it leads an empty schedule: the beat loops re-plan
    }


def test_schedule_in_prices_on_the_server_clock(r: valkey.Valkey, q: str) -> None:
    lo = server_ms(r)
    assert send(r, *schedule(q, J1, b"x", "in", 60_000)) == 1
    hi = server_ms(r)
    score = r.zscore(k(q, "schedule"), J1)
    assert lo + 60_000 <= score <= hi + 60_000


def test_schedule_duplicate_is_0_and_writes_nothing(r: valkey.Valkey, q: str) -> None:
    r.hset(k(q, "job:" + J1), mapping={"state": "active", "attempts": "3", "payload": "old"})
    before = snapshot(r, q)
    assert send(r, *schedule(q, J1, b"new", "in", 5)) == 0
    assert snapshot(r, q) == before


def test_schedule_row_of_another_type_is_a_duplicate(r: valkey.Valkey, q: str) -> None:
    r.set(k(q, "job:" + J1), "x")
    before = snapshot(r, q)
    assert send(r, *schedule(q, J1)) == 0
    assert snapshot(r, q) == before


# -- EMQ.PROMOTE ----------------------------------------------------------------------------


def test_promote_releases_due_flat_jobs_to_pending_and_wakes(r: valkey.Valkey, q: str) -> None:
    for job, due in ((J1, 5), (J2, 7), (J3, FAR)):
        assert send(r, *schedule(q, job, b"p" + job.encode(), "at", due)) == 1
    assert send(r, *promote(q)) == 2
    snap = snapshot(r, q)
    assert snap["pending"] == ("zset", {J1: 0.0, J2: 0.0})
    assert snap["schedule"] == ("zset", {J3: float(FAR)})
    for job in (J1, J2):
        assert snap["job:" + job] == (
            "hash", {"state": b"pending", "attempts": b"0", "payload": b"p" + job.encode()})
    assert snap["job:" + J3][1]["state"] == b"scheduled"
    assert snap["wake"] == ("list", [b"1"])
    # idempotent: nothing left due, nothing moves twice, the one wake token stays one
    before = snapshot(r, q)
    assert send(r, *promote(q)) == 0
    assert snapshot(r, q) == before


def test_promote_keeps_one_wake_token(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1, due=1))
    r.rpush(k(q, "wake"), "1")
    assert send(r, *promote(q)) == 1
    assert r.lrange(k(q, "wake"), 0, -1) == [b"1"]


def test_promote_is_bounded_by_the_batch_in_score_order(r: valkey.Valkey, q: str) -> None:
    for job, due in ((J1, 30), (J2, 10), (J3, 20)):
        send(r, *schedule(q, job, due=due))
    assert send(r, *promote(q, 2)) == 2
    assert r.zrange(k(q, "pending"), 0, -1) == [J2.encode(), J3.encode()]  # lowest scores
    assert r.zrange(k(q, "schedule"), 0, -1) == [J1.encode()]
    assert send(r, *promote(q, 2)) == 1


def test_promote_empties_the_schedule_key(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1, due=1))
    assert send(r, *promote(q, 1)) == 1
    assert r.exists(k(q, "schedule")) == 0


def test_promote_empty_schedule_is_0(r: valkey.Valkey, q: str) -> None:
    assert send(r, *promote(q)) == 0
    assert snapshot(r, q) == {}


def test_promote_ghost_is_only_removed_and_counted(r: valkey.Valkey, q: str) -> None:
    r.zadd(k(q, "schedule"), {J1: 3})
    assert send(r, *promote(q)) == 1
    assert snapshot(r, q) == {}  # no skeleton row, no pending member, no wake token


def test_promote_ghost_among_flat_jobs(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J2, due=2))
    r.zadd(k(q, "schedule"), {J1: 1})
    assert send(r, *promote(q)) == 2
    snap = snapshot(r, q)
    assert set(snap) == {"job:" + J2, "pending", "wake", "stats", "due"}
    assert snap["pending"] == ("zset", {J2: 0.0})


def test_promote_grouped_due_row_refuses_the_whole_call(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1, due=1))
    send(r, *schedule(q, J2, due=2))
    r.hset(k(q, "job:" + J2), "group", "g1")
    refused(r, q, promote(q), "EMQSTATE promote lane not native")


def test_promote_grouped_row_not_selected_does_not_refuse(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1, due=1))
    send(r, *schedule(q, J2, due=FAR))
    r.hset(k(q, "job:" + J2), "group", "g1")
    assert send(r, *promote(q)) == 1
    # nor one beyond the batch
    send(r, *schedule(q, J3, due=2))
    r.hset(k(q, "job:" + J3), "group", "g1")
    r.zadd(k(q, "schedule"), {J3: 1})
    r.zadd(k(q, "schedule"), {"JOB0": 0})
    assert send(r, *promote(q, 1)) == 1  # the ghost JOB0 only


@pytest.mark.parametrize("batch", ["0", "-1", "x", "1.5", "", "+3"])
def test_promote_batch_must_be_positive(r: valkey.Valkey, q: str, batch: str) -> None:
    send(r, *schedule(q, J1, due=1))
    refused(r, q, promote(q, batch), "ERR EMQ.PROMOTE batch must be a positive integer")


def test_promote_wrong_type_row_writes_nothing(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1, due=1))
    r.zadd(k(q, "schedule"), {J2: 2})
    r.set(k(q, "job:" + J2), "not a row")
    refused(r, q, promote(q), WRONGTYPE)


# -- EMQ.DELAY ------------------------------------------------------------------------------


def test_delay_live_holder_writes_the_scripts_writes(r: valkey.Valkey, q: str) -> None:
    held(r, q, J1, "2", failures="1", stalled="1")
    r.zadd(k(q, "active"), {J2: FAR})  # another holder stays
    assert send(r, *delay(q, J1, "2", "at", 777)) == 1
    assert snapshot(r, q) == {
        "job:" + J1: ("hash", {"state": b"scheduled", "attempts": b"2", "payload": b"p\x00q",
                               "failures": b"1", "stalled": b"1"}),
        "active": ("zset", {J2: float(FAR)}),
        "schedule": ("zset", {J1: 777.0}),
        "due": ("list", [b"1"]),
    }


def test_delay_in_prices_on_the_server_clock(r: valkey.Valkey, q: str) -> None:
    held(r, q, J1)
    lo = server_ms(r)
    assert send(r, *delay(q, J1, "1", "in", 5_000)) == 1
    hi = server_ms(r)
    assert lo + 5_000 <= r.zscore(k(q, "schedule"), J1) <= hi + 5_000
    assert r.exists(k(q, "active")) == 0


def test_delay_missing_row_is_gone(r: valkey.Valkey, q: str) -> None:
    r.zadd(k(q, "active"), {J1: FAR})
    refused(r, q, delay(q, J1), "EMQSTALE job gone")


def test_delay_row_without_attempts_is_gone(r: valkey.Valkey, q: str) -> None:
    r.hset(k(q, "job:" + J1), "state", "active")
    r.zadd(k(q, "active"), {J1: FAR})
    refused(r, q, delay(q, J1), "EMQSTALE job gone")


@pytest.mark.parametrize("token", ["2", "0", "01", "1 ", "x", ""])
def test_delay_stale_token(r: valkey.Valkey, q: str, token: str) -> None:
    held(r, q, J1, "1")
    refused(r, q, delay(q, J1, token), "EMQSTALE delay token mismatch")


def test_delay_holder_not_in_active(r: valkey.Valkey, q: str) -> None:
    held(r, q, J1)
    r.zrem(k(q, "active"), J1)
    refused(r, q, delay(q, J1), "EMQSTATE delay not active")


def test_delay_grouped_row(r: valkey.Valkey, q: str) -> None:
    held(r, q, J1, group="g1")
    refused(r, q, delay(q, J1), "EMQSTATE delay lane not native")


# -- EMQ.RESCHEDULE -------------------------------------------------------------------------


def test_reschedule_rescores_and_keeps_the_row(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1, b"keep", "at", FAR))
    before = snapshot(r, q)
    assert send(r, *reschedule(q, J1, "at", 42)) == 1
    after = snapshot(r, q)
    assert after["schedule"] == ("zset", {J1: 42.0})
    before.pop("schedule")
    after.pop("schedule")
    assert after == before


def test_reschedule_in_prices_on_the_server_clock(r: valkey.Valkey, q: str) -> None:
    send(r, *schedule(q, J1))
    lo = server_ms(r)
    assert send(r, *reschedule(q, J1, "in", 9_000)) == 1
    hi = server_ms(r)
    assert lo + 9_000 <= r.zscore(k(q, "schedule"), J1) <= hi + 9_000


def test_reschedule_missing_row_is_minus_1(r: valkey.Valkey, q: str) -> None:
    r.zadd(k(q, "schedule"), {J1: 5})  # a ghost: on the set, no row
    before = snapshot(r, q)
    assert send(r, *reschedule(q, J1)) == -1
    assert snapshot(r, q) == before


def test_reschedule_not_scheduled(r: valkey.Valkey, q: str) -> None:
    held(r, q, J1)
    refused(r, q, reschedule(q, J1), "EMQSTATE reschedule not scheduled")
    send(r, *schedule(q, J2))
    r.zrem(k(q, "schedule"), J2)
    refused(r, q, reschedule(q, J2), "EMQSTATE reschedule not scheduled")


def test_reschedule_writes_only_zadd_xx(r: valkey.Valkey, q: str, srv: EmbeddedServer) -> None:
    send(r, *schedule(q, J1))
    r.config_resetstat()
    assert send(r, *reschedule(q, J1, "at", 9)) == 1
    # MONITOR would race; the replication stream is checked in test_native_persist.
    stats = r.info("commandstats")
    assert "cmdstat_emq.reschedule" in stats
    assert not any(name.startswith("cmdstat_zadd") for name in stats)


# -- registration facts ---------------------------------------------------------------------


def test_getkeys_names_the_declared_keys(r: valkey.Valkey, q: str) -> None:
    args = delay(q, J1)
    conn = r.connection_pool.get_connection("COMMAND")
    try:  # sent on a bare connection: valkey-py's reply parser for GETKEYS chokes on it
        conn.send_command("COMMAND", "GETKEYS", *args)
        keys = conn.read_response()
    finally:
        r.connection_pool.release(conn)
    assert [x.decode() for x in keys] == list(args[2:5])


def test_module_is_listed_as_emq(r: valkey.Valkey) -> None:
    names = [m[b"name"] for m in r.module_list()]
    assert b"emq" in names


# -- the year-9999 bound on every due (the Python guards' bound, on the server side) --------

MAX_DUE = 253402300799999


@pytest.mark.parametrize("verb", ["SCHEDULE", "DELAY", "RESCHEDULE"])
def test_due_past_year_9999_is_refused(r: valkey.Valkey, q: str, verb: str) -> None:
    held(r, q, J1)
    make = {"SCHEDULE": lambda **kw: schedule(q, J2, **kw),
            "DELAY": lambda **kw: delay(q, J1, **kw),
            "RESCHEDULE": lambda **kw: reschedule(q, J1, **kw)}[verb]
    text = f"ERR EMQ.{verb} due must be at most 253402300799999 (year 9999)"
    refused(r, q, make(mode="at", due=MAX_DUE + 1), text)
    # 'in' bounds the priced instant: now + due
    refused(r, q, make(mode="in", due=MAX_DUE - 1000), text)


def test_due_at_the_bound_is_admitted(r: valkey.Valkey, q: str) -> None:
    assert send(r, *schedule(q, J1, due=MAX_DUE)) == 1
    assert r.zscore(k(q, "schedule"), J1) == MAX_DUE


def test_promote_scores_a_flat_row_by_its_priority(r: valkey.Valkey, q: str) -> None:
    for job, pri in ((J1, b"7"), (J2, None), (J3, b"3")):
        assert send(r, *schedule(q, job, due=0)) == 1
        if pri:
            r.hset(k(q, "job:" + job), "priority", pri)
    assert send(r, *promote(q)) == 3
    assert r.zrange(k(q, "pending"), 0, -1, withscores=True) == [
        (J2.encode(), 0.0), (J3.encode(), 3.0), (J1.encode(), 7.0)
    ]


# -- the due token: a run-at that leads the schedule (the scripts' includes/lead.lua) -------


def test_a_run_at_that_leads_the_schedule_leaves_one_due_token(r: valkey.Valkey, q: str) -> None:
    def taken() -> list[bytes]:
        got = r.lrange(k(q, "due"), 0, -1)
        r.delete(k(q, "due"))
        return got

    assert send(r, *schedule(q, J1, due=FAR - 10)) == 1
    assert taken() == [b"1"]  # an empty schedule: any run-at leads it
    assert send(r, *schedule(q, J2, due=FAR)) == 1
    assert taken() == []  # behind the head
    assert send(r, *schedule(q, J3, due=FAR - 10)) == 1
    assert taken() == []  # a tie with the head
    held(r, q, "JOB01D")
    assert send(r, *delay(q, "JOB01D", due=FAR - 20)) == 1
    assert send(r, *reschedule(q, J2, due=FAR - 30)) == 1
    assert taken() == [b"1"]  # two new heads, one token kept
    assert send(r, *reschedule(q, J2, due=FAR + 5)) == 1  # the head moves back: no token
    assert send(r, *reschedule(q, J1, due=FAR - 15)) == 1  # behind the head JOB01D
    assert taken() == []
    r.set(k(q, "due"), "x")  # a due key of another type is skipped, as the wake key is
    assert send(r, *schedule(q, "JOB01E", due=1)) == 1
    assert r.get(k(q, "due")) == b"x"
