"""EMQ.ENQUEUE and EMQ.SCHEDULE with the scripts' option tail (priority, group, unique key,
unique_for, notify): wire 6 sends them for every admission without a group.

Raw commands on a module-loaded server beside the scripts: the writes (rows field by field,
sets, the unique key and its TTL, tokens, counters) and the replies (1, 0, the owner's id)
agree; every refusal writes nothing; and the verbs send the module at wire 6.
"""

from __future__ import annotations

import time

import pytest
import valkey

from echomq import Connector, scripts
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs
from tests.support.native import (
    FAR,
    J1,
    J2,
    J3,
    KIND,
    WRONGTYPE,
    fresh_queue,
    k,
    refused,
    send,
    snapshot,
)

NONE = ("", "", "", "", "")


def opts(priority: object = "", group: str = "", unique: str = "", unique_for: object = "",
         notify: object = "") -> tuple:
    return (priority, group, unique, unique_for, notify)


def native_enqueue(q: str, job: str, tail: tuple, payload: object = b"p") -> tuple:
    return ("EMQ.ENQUEUE", 2, k(q, "job:" + job), k(q, "pending"), job, payload, *tail)


def native_schedule(q: str, job: str, tail: tuple, mode: str = "at", due: object = FAR) -> tuple:
    return ("EMQ.SCHEDULE", 2, k(q, "job:" + job), k(q, "schedule"), job, b"p", mode, due,
            *tail)


def script_enqueue(r: valkey.Valkey, q: str, job: str, tail: tuple) -> object:
    return send(r, "EVAL", scripts.source("enqueue"), 2, k(q, "job:" + job), k(q, "pending"),
                job, b"p", *tail)


def script_schedule(r: valkey.Valkey, q: str, job: str, tail: tuple, mode: str = "at",
                    due: object = FAR) -> object:
    return send(r, "EVAL", scripts.source("schedule"), 2, k(q, "job:" + job),
                k(q, "schedule"), job, b"p", mode, due, *tail)


def fields(r: valkey.Valkey, key: str) -> list[bytes]:
    """A hash's field names in the server's order (a listpack keeps insertion order)."""
    return list(r.hgetall(key))


def without_clock(snap: dict) -> dict:
    """A snapshot with the clock-priced unique_until blanked (the two calls ran ms apart)."""
    out = {}
    for key, (kind, content) in snap.items():
        if kind == "hash" and "unique_until" in content:
            content = {**content, "unique_until": b"<clock>"}
        out[key] = (kind, content)
    return out


@pytest.mark.parametrize("tail", [
    opts(priority=7),
    opts(unique="inv-42"),
    opts(unique="inv-42", unique_for=60_000),
    opts(notify=5_000),
    opts(priority=3, unique="inv-42", unique_for=1, notify=5_000),
    opts(unique_for=60_000),  # without a unique key: ignored, as the script ignores it
    NONE,
])
def test_options_write_what_the_scripts_write(r: valkey.Valkey, tail: tuple) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    assert script_enqueue(r, q4, J1, tail) == 1
    assert send(r, *native_enqueue(q6, J1, tail)) == 1
    later = (*tail[:2], tail[2] and tail[2] + "-s", *tail[3:])  # its own unique key
    assert script_schedule(r, q4, J2, later, "in", 60_000) == 1
    assert send(r, *native_schedule(q6, J2, later, "in", 60_000)) == 1
    s4, s6 = snapshot(r, q4), snapshot(r, q6)
    assert s6["schedule"][1].keys() == s4["schedule"][1].keys()
    assert abs(s6["schedule"][1][J2] - s4["schedule"][1][J2]) < 5_000
    s4.pop("schedule"), s6.pop("schedule")
    assert without_clock(s6) == without_clock(s4)
    for job in (J1, J2):
        assert fields(r, k(q6, "job:" + job)) == fields(r, k(q4, "job:" + job))
    row = s6["job:" + J1][1]
    if tail[0]:
        assert row["priority"] == str(tail[0]).encode()
        assert s6["pending"][1][J1] == float(tail[0])
    if tail[2] and tail[3]:
        until = int(row["unique_until"])
        assert abs(until - (int(time.time() * 1000) + int(tail[3]))) < 5_000
    if tail[2]:
        assert r.pttl(k(q6, "unique:" + tail[2])) == -1  # no TTL while the job lives


def test_a_live_owner_answers_its_id_and_nothing_is_written(r: valkey.Valkey) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    tail = opts(unique="inv-1")
    assert script_enqueue(r, q4, J1, tail) == 1
    assert send(r, *native_enqueue(q6, J1, tail)) == 1
    for q, run in ((q4, lambda: script_enqueue(r, q4, J2, tail)),
                   (q6, lambda: send(r, *native_enqueue(q6, J2, tail)))):
        before = snapshot(r, q)
        assert run() == J1.encode()
        assert snapshot(r, q) == before
    # the schedule too, and a scheduled owner is live
    assert send(r, *native_schedule(q6, J3, opts(unique="inv-2"))) == 1
    before = snapshot(r, q6)
    assert send(r, *native_enqueue(q6, "JOB01DDDD", opts(unique="inv-2"))) == J3.encode()
    assert snapshot(r, q6) == before


@pytest.mark.parametrize("state, live", [
    ("pending", True), ("scheduled", True), ("active", True), ("waiting-children", True),
    ("completed", False), ("dead", False), (None, False),
])
def test_owner_liveness_follows_the_owner_row(r: valkey.Valkey, state: str | None,
                                              live: bool) -> None:
    replies = []
    for q, run in ((q4 := fresh_queue(), lambda q: script_enqueue(r, q, J2, opts(unique="u"))),
                   (fresh_queue(), lambda q: send(r, *native_enqueue(q, J2, opts(unique="u"))))):
        r.set(k(q, "unique:u"), J1)
        if state is not None:
            r.hset(k(q, "job:" + J1), "state", state)
        replies.append(run(q))
        if live:
            assert r.get(k(q, "unique:u")) == J1.encode()
        else:  # stale: taken over by the new job
            assert r.get(k(q, "unique:u")) == J2.encode()
            assert r.hget(k(q, "job:" + J2), "unique") == b"u"
    assert replies[0] == replies[1] == (J1.encode() if live else 1), (q4, replies)


def test_a_unique_for_window_holds_the_key_past_the_owners_end(r: valkey.Valkey) -> None:
    for q, run in ((fresh_queue(), lambda q, j: script_enqueue(r, q, j, opts(unique="w"))),
                   (fresh_queue(), lambda q, j: send(r, *native_enqueue(q, j, opts(unique="w"))))):
        r.set(k(q, "unique:w"), J1, px=60_000)  # an ended owner's window still runs
        r.hset(k(q, "job:" + J1), "state", "completed")
        assert run(q, J2) == J1.encode()
        r.pexpire(k(q, "unique:w"), 1)
        time.sleep(0.01)
        r.set(k(q, "unique:w"), J1)  # no TTL, owner ended: stale
        assert run(q, J2) == 1
        assert r.pttl(k(q, "unique:w")) == -1


@pytest.mark.parametrize("tail, text", [
    (opts(priority=-1), "ERR EMQ.ENQUEUE priority must be an integer 0..1000000"),
    (opts(priority=1_000_001), "ERR EMQ.ENQUEUE priority must be an integer 0..1000000"),
    (opts(priority="x"), "ERR EMQ.ENQUEUE priority must be an integer 0..1000000"),
    (opts(group="g"), "EMQSTATE enqueue lane not native"),
    (opts(unique="u", unique_for=0), "ERR EMQ.ENQUEUE unique_for must be a positive integer"),
    (opts(unique="u", unique_for="1.5"),
     "ERR EMQ.ENQUEUE unique_for must be a positive integer"),
    (opts(notify=0), "ERR EMQ.ENQUEUE notify must be a positive integer"),
    (opts(notify="soon"), "ERR EMQ.ENQUEUE notify must be a positive integer"),
])
def test_enqueue_option_refusals_write_nothing(r: valkey.Valkey, q: str, tail: tuple,
                                               text: str) -> None:
    refused(r, q, native_enqueue(q, J1, tail), text)


def test_schedule_option_refusals_name_their_verb(r: valkey.Valkey, q: str) -> None:
    refused(r, q, native_schedule(q, J1, opts(priority=-1)),
            "ERR EMQ.SCHEDULE priority must be an integer 0..1000000")
    refused(r, q, native_schedule(q, J1, opts(group="g")), "EMQSTATE schedule lane not native")
    refused(r, q, native_schedule(q, J1, opts(notify=-3)),
            "ERR EMQ.SCHEDULE notify must be a positive integer")
    refused(r, q, native_schedule(q, J1, opts(unique="u"), mode="soon"),
            "ERR EMQ.SCHEDULE mode must be in or at")


def test_shape_and_type_refusals_write_nothing(r: valkey.Valkey, q: str) -> None:
    refused(r, q, native_enqueue(q, "XYZ", opts(priority=1)), KIND)
    refused(r, q, native_enqueue(q, J1, opts(priority=1))[:-1],
            "ERR wrong number of arguments for 'emq.enqueue' command")
    r.hset(k(q, "unique:u"), "x", "y")  # the unique key of another type
    refused(r, q, native_enqueue(q, J1, opts(unique="u")), WRONGTYPE)
    r.delete(k(q, "unique:u"))
    r.set(k(q, "unique:u"), J2)
    r.set(k(q, "job:" + J2), "not a row")  # the owner's row of another type
    refused(r, q, native_enqueue(q, J1, opts(unique="u")), WRONGTYPE)
    r.delete(k(q, "job:" + J2), k(q, "unique:u"))
    r.hset(k(q, "stats"), "enqueued", "many")
    refused(r, q, native_enqueue(q, J1, opts(unique="u", priority=2)),
            "ERR hash value is not an integer")
    r.delete(k(q, "stats"))
    r.set(k(q, "pending"), "x")
    refused(r, q, native_enqueue(q, J1, opts(priority=2)), WRONGTYPE)


def test_a_duplicate_id_is_0_before_the_unique_key_is_read(r: valkey.Valkey, q: str) -> None:
    assert send(r, *native_enqueue(q, J1, opts(unique="u"))) == 1
    before = snapshot(r, q)
    assert send(r, *native_enqueue(q, J1, opts(unique="other"))) == 0
    assert snapshot(r, q) == before


def test_the_verbs_send_the_module_at_wire_6_and_a_group_the_script(srv: EmbeddedServer) -> None:
    q = fresh_queue()
    with Connector.connect(srv.url, wire=6) as c6:
        def calls() -> dict[str, int]:
            stats = c6.client.info("commandstats")
            return {n: int(stats.get(f"cmdstat_{n}", {}).get("calls", 0))
                    for n in ("emq.enqueue", "emq.schedule", "evalsha", "eval")}

        before = calls()
        assert jobs.enqueue(c6, q, ids.mint(), b"x", priority=5) == "enqueued"
        assert jobs.enqueue_in(c6, q, ids.mint(), b"x", 1_000, priority=5) == "scheduled"
        first = jobs.admit(c6, q, ids.mint(), b"x", unique="k", notify_ms=1_000)
        again = jobs.admit(c6, q, ids.mint(), b"x", unique="k")
        assert again.outcome == "duplicate" and again.id == first.id
        after = calls()
        assert after["emq.enqueue"] - before["emq.enqueue"] == 3
        assert after["emq.schedule"] - before["emq.schedule"] == 1
        assert after["evalsha"] + after["eval"] == before["evalsha"] + before["eval"]
        jobs.enqueue(c6, q, ids.mint(), b"x", group="g")
        assert calls()["evalsha"] + calls()["eval"] > after["evalsha"] + after["eval"]
