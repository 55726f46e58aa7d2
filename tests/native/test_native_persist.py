"""The module's writes survive: DEBUG RELOAD, AOF rewrite, AOF replay, a replica, Redis 7.

The module replicates the EFFECTS of each command (plain HSET/ZREM/ZADD with absolute
scores, RPUSH), never the EMQ.* command itself, so the AOF and a replica hold what the
primary did, not a re-run on another clock. These tests check exactly that: the AOF holds
no EMQ.* line, and replaying it on a server WITHOUT the module gives the same keys.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest
import valkey

from echomq import Connector, native
from echomq.core import errors
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs
from tests.support.native import REDIS7, fresh_queue, snapshot, start_server
from tests.support.polling import wait_for

FAR = 40_000_000_000_000
IDS = [f"JOB01{c * 24}" for c in "ABCDEFG"]


def workload(url: str, q: str) -> None:
    """Every native verb with a write: schedule at/in, promote (+ ghost), delay, reschedule."""
    with Connector.connect(url, wire=6) as c6:
        for i, job in enumerate(IDS[:4]):
            assert jobs.enqueue_at(c6, q, job, f"p{i}".encode(), i + 1) == "scheduled"
        assert jobs.enqueue_in(c6, q, IDS[4], b"later", 3_600_000) == "scheduled"
        assert jobs.enqueue_at(c6, q, IDS[5], b"far", FAR) == "scheduled"
        c6.call("ZADD", jobs.keyspace.queue_key(q, "schedule"), 0, IDS[6])  # a ghost
        assert jobs.promote(c6, q, 3) == 3
        claim = jobs.claim(c6, q, 60_000)
        assert claim is not None
        jobs.delay(c6, q, claim.id, claim.token, 120_000)  # 'in': priced on this clock
        assert jobs.reschedule(c6, q, IDS[5], "in", 7_200_000) == 1


def hot_workload(url: str, q: str) -> None:
    """The worker's hot path natively: claims, acks kept and deleted, a batch of acks with
    results, a unique key released, a kept result's done token."""
    with Connector.connect(url, wire=6) as c6:
        for i, job in enumerate(IDS[:5]):
            jobs.admit(c6, q, job, f"h{i}".encode(), priority=i % 2,
                       unique="u" if i == 3 else None, unique_for_ms=60_000 if i == 3 else None,
                       notify_ms=60_000 if i == 4 else None)
        held = jobs.claim_many(c6, q, 60_000, 5)
        assert len(held) == 5
        jobs.ack(c6, q, held[0].id, held[0].token, keep=True)
        jobs.ack(c6, q, held[1].id, held[1].token, keep=False, result=b"1",
                 keep_result_ms=60_000)
        refused = jobs.ack_many(c6, q, [(c.id, c.token, b"[2]", 60_000) for c in held[2:]],
                                keep=True)
        assert refused == [None, None, None]
        stats = c6.client.info("commandstats")
        assert all(stats[f"cmdstat_emq.{n}"]["failed_calls"] == 0
                   for n in ("claim", "ack", "ackmany"))


def aof_text(data_dir: pathlib.Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((data_dir / "appendonlydir").glob("*.aof")))


@pytest.fixture
def persistent(tmp_path: pathlib.Path) -> Iterator[EmbeddedServer]:
    s = start_server(data_dir=tmp_path, extra_args=["--enable-debug-command", "yes"])
    yield s
    s.stop()


def test_debug_reload_keeps_state_and_module(persistent: EmbeddedServer) -> None:
    q = fresh_queue()
    workload(persistent.url, q)
    raw = valkey.Valkey.from_url(persistent.url)
    before = snapshot(raw, q)
    assert raw.execute_command("DEBUG", "RELOAD")
    assert snapshot(raw, q) == before
    assert b"emq" in [m[b"name"] for m in raw.module_list()]
    workload(persistent.url, fresh_queue())  # the commands still work after the reload
    raw.close()


def test_aof_holds_effects_and_replays_without_the_module(
    persistent: EmbeddedServer, tmp_path: pathlib.Path
) -> None:
    q, h = fresh_queue(), fresh_queue()
    workload(persistent.url, q)
    hot_workload(persistent.url, h)
    raw = valkey.Valkey.from_url(persistent.url)
    expected = snapshot(raw, q)
    expected_hot = snapshot(raw, h)
    raw.close()
    persistent.stop()
    aof = aof_text(tmp_path)
    assert b"ZADD" in aof and b"HSET" in aof
    assert b"EMQ." not in aof.upper()  # effects, not the command
    # replay on a server without the module: plain commands, the same state
    again = start_server(data_dir=tmp_path, module=False)
    try:
        raw = valkey.Valkey.from_url(again.url)
        assert snapshot(raw, q) == expected
        assert snapshot(raw, h) == expected_hot
        raw.close()
    finally:
        again.stop()


def test_bgrewriteaof_then_restart_reproduces_the_state(
    persistent: EmbeddedServer, tmp_path: pathlib.Path
) -> None:
    q = fresh_queue()
    workload(persistent.url, q)
    raw = valkey.Valkey.from_url(persistent.url)
    raw.bgrewriteaof()
    wait_for(lambda: raw.info("persistence")["aof_rewrite_in_progress"] == 0
             and raw.info("persistence")["aof_rewrite_scheduled"] == 0)
    workload(persistent.url, q + "b")  # writes after the rewrite land in the new incr file
    expected = {p: snapshot(raw, p) for p in (q, q + "b")}
    raw.close()
    persistent.stop()
    again = start_server(data_dir=tmp_path)
    try:
        raw = valkey.Valkey.from_url(again.url)
        assert {p: snapshot(raw, p) for p in (q, q + "b")} == expected
        raw.close()
    finally:
        again.stop()


@pytest.mark.slow
def test_replica_sees_the_primarys_scores(tmp_path: pathlib.Path) -> None:
    primary = start_server(password="pw")
    replica = None
    try:
        assert primary.port is not None
        # the replica has no module: it applies the effects as plain commands
        replica = start_server(module=False, password="pw", extra_args=[
            "--replicaof", "127.0.0.1", str(primary.port), "--masterauth", "pw"])
        rr = valkey.Valkey.from_url(replica.url)
        wait_for(lambda: rr.info("replication").get("master_link_status") == "up")
        q, h = fresh_queue(), fresh_queue()
        workload(primary.url, q)
        hot_workload(primary.url, h)
        pr = valkey.Valkey.from_url(primary.url)
        assert pr.wait(1, 5000) == 1
        assert snapshot(rr, q) == snapshot(pr, q)
        assert snapshot(rr, h) == snapshot(pr, h)
        pr.close()
        rr.close()
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()


# In CI .ci/run installs Debian's redis-server, so there a missing binary fails the test.
@pytest.mark.skipif(
    not REDIS7.exists() and not os.environ.get("CI"), reason="no stock redis-server at /usr/bin"
)
def test_loads_into_stock_redis_and_answers_the_same() -> None:
    srv = start_server(binary=str(REDIS7))
    try:
        raw = valkey.Valkey.from_url(srv.url)
        assert raw.info("server")["redis_version"].split(".")[0] >= "7"
        assert b"emq" in [m[b"name"] for m in raw.module_list()]
        q = fresh_queue()
        workload(srv.url, q)
        snap = snapshot(raw, q)
        # promote took the ghost, IDS[0] and IDS[1]; the claim took IDS[0], delay parked it
        assert snap["pending"] == ("zset", {IDS[1]: 0.0})
        assert set(snap["schedule"][1]) == {IDS[0], IDS[2], IDS[3], IDS[4], IDS[5]}
        assert "job:" + IDS[6] not in snap  # the ghost was only unscheduled
        with Connector.connect(srv.url, wire=6) as c6, pytest.raises(
            errors.StateError, match=r"^EMQSTATE reschedule not scheduled$"
        ):
            jobs.reschedule(c6, q, IDS[1], "at", 5)
        h = fresh_queue()
        hot_workload(srv.url, h)
        assert snapshot(raw, h)["stats"][1]["completed"] == b"5"
        raw.close()
    finally:
        srv.stop()


def test_unload_and_load_again(tmp_path: pathlib.Path) -> None:
    srv = start_server(extra_args=["--enable-module-command", "yes"])
    try:
        raw = valkey.Valkey.from_url(srv.url)
        workload(srv.url, fresh_queue())
        assert raw.execute_command("MODULE", "UNLOAD", "emq")
        with pytest.raises(valkey.exceptions.ResponseError, match="unknown command"):
            raw.execute_command("EMQ.PROMOTE", 2, "emq:{x}:schedule", "emq:{x}:pending",
                                "emq:{x}:", 1)
        assert raw.execute_command("MODULE", "LOAD", str(native.module_path()))
        workload(srv.url, fresh_queue())
        raw.close()
    finally:
        srv.stop()


def test_deny_oom_refuses_before_writing() -> None:
    srv = start_server()
    try:
        raw = valkey.Valkey.from_url(srv.url)
        q = fresh_queue()
        raw.config_set("maxmemory", "1")
        with pytest.raises(valkey.exceptions.ResponseError, match="used memory > 'maxmemory'"):
            raw.execute_command("EMQ.SCHEDULE", 2, f"emq:{{{q}}}:job:{IDS[0]}",
                                f"emq:{{{q}}}:schedule", IDS[0], "p", "at", 5)
        raw.config_set("maxmemory", "0")
        assert snapshot(raw, q) == {}
        raw.close()
    finally:
        srv.stop()
