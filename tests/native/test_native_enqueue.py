"""EMQ.ENQUEUE, the native twin of the enqueue script's plain path (wire 6 sends it for
every ``jobs.enqueue`` / ``task.enqueue`` without options).

Raw commands on a module-loaded server: its writes equal the script's key by key, a
duplicate and every refusal write nothing (a snapshot of the queue before and after), the
effects (not the command) reach the AOF, and the connectors send it at wire 6 only.
"""

from __future__ import annotations

import pathlib

import pytest
import valkey

from echomq import Connector, scripts
from echomq.core import errors
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs
from tests.support.native import (
    J1,
    J2,
    J3,
    WRONGTYPE,
    enqueue,
    fresh_queue,
    k,
    refused,
    send,
    snapshot,
    start_server,
)


def script(r: valkey.Valkey, q: str, job: str, payload: object = b"p") -> object:
    return send(r, "EVAL", scripts.source("enqueue"), 2, k(q, "job:" + job), k(q, "pending"),
                job, payload)


def renamed(snap: dict, old: str, new: str) -> dict:
    return {key.replace(old, new): v for key, v in snap.items()}


def test_enqueue_writes_what_the_script_writes(r: valkey.Valkey) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    for job, payload in ((J1, b"a\x00b"), (J2, b""), (J3, "x" * 300)):
        assert script(r, q4, job, payload) == 1
        assert send(r, *enqueue(q6, job, payload)) == 1
    r.lpop(k(q4, "wake"))  # a consumer took the token: the next admission leaves a new one
    r.lpop(k(q6, "wake"))
    assert script(r, q4, "JOB01DDDD") == 1
    assert send(r, *enqueue(q6, "JOB01DDDD")) == 1
    snap = snapshot(r, q6)
    assert snap == snapshot(r, q4)
    assert snap["job:" + J1] == ("hash", {"state": b"pending", "attempts": b"0",
                                          "payload": b"a\x00b"})
    assert snap["pending"] == ("zset", {J1: 0.0, J2: 0.0, J3: 0.0, "JOB01DDDD": 0.0})
    assert snap["wake"] == ("list", [b"1"])
    assert snap["stats"] == ("hash", {"enqueued": b"4"})
    # the row keeps the server's compact encoding for small values, as HSET would
    assert r.object("encoding", k(q6, "job:" + J1)) == r.object("encoding", k(q4, "job:" + J1))
    assert r.object("encoding", k(q6, "job:" + J3)) == r.object("encoding", k(q4, "job:" + J3))


def test_enqueue_counter_continues_an_existing_count(r: valkey.Valkey, q: str) -> None:
    r.hset(k(q, "stats"), mapping={"enqueued": 41, "completed": 7})
    assert send(r, *enqueue(q, J1)) == 1
    assert r.hgetall(k(q, "stats")) == {b"enqueued": b"42", b"completed": b"7"}


def test_enqueue_duplicate_is_0_and_writes_nothing(r: valkey.Valkey, q: str) -> None:
    assert send(r, *enqueue(q, J1, b"first")) == 1
    before = snapshot(r, q)
    assert send(r, *enqueue(q, J1, b"second")) == 0
    assert snapshot(r, q) == before


def test_enqueue_row_of_another_type_is_a_duplicate(r: valkey.Valkey, q: str) -> None:
    r.set(k(q, "job:" + J1), "x")
    before = snapshot(r, q)
    assert send(r, *enqueue(q, J1)) == 0
    assert snapshot(r, q) == before


def test_enqueue_wrong_type_stats_writes_no_row(r: valkey.Valkey, q: str) -> None:
    r.set(k(q, "stats"), "x")
    refused(r, q, enqueue(q, J1), WRONGTYPE)


@pytest.mark.parametrize(("value", "text"), [
    (b"x", "ERR hash value is not an integer"),
    (b"1.5", "ERR hash value is not an integer"),
    (b"9223372036854775807", "ERR increment or decrement would overflow"),
])
def test_enqueue_counter_hincrby_would_refuse_writes_no_row(
    r: valkey.Valkey, q: str, value: bytes, text: str
) -> None:
    r.hset(k(q, "stats"), "enqueued", value)
    refused(r, q, enqueue(q, J1), text)
    # the script refuses with the same text, but after its writes (HINCRBY runs last)
    assert isinstance(script(r, q, J1), errors.ServerError)
    assert r.exists(k(q, "job:" + J1))


def test_enqueue_wake_key_of_another_type_is_skipped(r: valkey.Valkey, q: str) -> None:
    r.set(k(q, "wake"), "x")
    assert send(r, *enqueue(q, J1)) == 1
    assert r.get(k(q, "wake")) == b"x"
    assert r.zscore(k(q, "pending"), J1) == 0


def test_enqueue_effects_reach_the_aof_and_replay_without_the_module(
    tmp_path: pathlib.Path,
) -> None:
    q = fresh_queue()
    srv = start_server(data_dir=tmp_path)
    try:
        with Connector.connect(srv.url, wire=6) as c6:
            assert jobs.enqueue(c6, q, J1, b"one") == "enqueued"
            assert jobs.enqueue(c6, q, J1, b"again") == "duplicate"
            assert jobs.enqueue(c6, q, J2, b"two") == "enqueued"
            expected = snapshot(c6.client, q)
    finally:
        srv.stop()
    aof = b"".join(p.read_bytes() for p in sorted((tmp_path / "appendonlydir").glob("*.aof")))
    assert b"HINCRBY" in aof and b"EMQ." not in aof.upper()
    again = start_server(data_dir=tmp_path, module=False)
    try:
        raw = valkey.Valkey.from_url(again.url)
        assert snapshot(raw, q) == expected
        assert expected["stats"] == ("hash", {"enqueued": b"2"})
        raw.close()
    finally:
        again.stop()


@pytest.mark.parametrize("wire", [4, 6])
def test_jobs_enqueue_sends_the_native_command_at_wire_6_only(
    srv: EmbeddedServer, r: valkey.Valkey, q: str, wire: int
) -> None:
    with Connector.connect(srv.url, wire=wire) as conn:
        r.config_resetstat()
        assert jobs.enqueue(conn, q, J1, b"p") == "enqueued"
        # a priority rides EMQ.ENQUEUE too; a group runs the script at either wire
        assert jobs.enqueue(conn, q, J2, b"p", priority=5) == "enqueued"
        assert jobs.enqueue(conn, q, J3, b"p", group="g") == "enqueued"
        stats = r.info("commandstats")
    assert stats.get("cmdstat_emq.enqueue", {}).get("calls", 0) == (2 if wire == 6 else 0)
    assert stats["cmdstat_evalsha"]["calls"] == (3 if wire == 4 else 1)
    assert r.zrange(k(q, "pending"), 0, -1, withscores=True) == [(J1.encode(), 0.0),
                                                                (J2.encode(), 5.0)]

