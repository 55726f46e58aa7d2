"""What an ack that deletes its row leaves behind, through the scripts (wire 4) and the EMQ
module (wire 6) alike: the task and runs beside a kept result (issue 32) and the seen mark
that makes a retried admission of a job that already ran a duplicate (issue 37).

The race of issue 37 exactly: a job admitted, claimed, run and acked with its row deleted;
then the retry of its admission (the first reply was lost) arrives. It must write nothing
and answer "duplicate", on every admission path (enqueue, schedule, an admission with
options, the bulk ones)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import valkey

from echomq import Connector, scripts
from echomq.core import codecs, ids
from echomq.core.outcomes import Outcome
from echomq.core.payload import Format, encode
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs, status
from tests.support.native import base, fresh_queue, k, send, snapshot

SEEN_MS = 30_000  # includes/seen.lua, emq.h


@pytest.fixture(params=[4, 6], ids=["scripts", "native"])
def conn(request: pytest.FixtureRequest, srv: EmbeddedServer) -> Iterator[Connector]:
    c = Connector.connect(srv.url, wire=request.param)
    yield c
    c.close()


def run_once(conn: Connector, q: str, jid: str, payload: bytes, *, result: bytes | None = None,
             many: bool = False) -> int:
    """Admit, claim, ack with the row deleted (and a kept result); the token (runs)."""
    assert jobs.enqueue(conn, q, jid, payload) == Outcome.ENQUEUED
    claim = jobs.claim(conn, q, 30_000)
    assert claim is not None and claim.id == jid
    if many:
        entry = (jid, claim.token) if result is None else (jid, claim.token, result, 60_000)
        assert jobs.ack_many(conn, q, [entry], False) == [None]
    else:
        jobs.ack(conn, q, jid, claim.token, False, result=result,
                 keep_result_ms=60_000 if result is not None else None)
    assert jobs.get(conn, q, jid) is None
    return claim.token


@pytest.mark.parametrize("many", [False, True], ids=["ack", "ackmany"])
def test_a_retried_admission_after_the_job_ran_and_was_deleted_writes_nothing(
        conn: Connector, r: valkey.Valkey, many: bool) -> None:
    q = fresh_queue()
    jid = ids.mint()
    run_once(conn, q, jid, encode("shop.charge", [1]), many=many)
    before = snapshot(r, q)
    assert jid.encode() in r.zrange(k(q, "seen"), 0, -1)
    again = encode("shop.charge", [1])
    assert jobs.enqueue(conn, q, jid, again) == Outcome.DUPLICATE
    assert jobs.enqueue(conn, q, jid, again, priority=5) == Outcome.DUPLICATE  # options path
    assert jobs.enqueue_at(conn, q, jid, again, 10**12) == Outcome.DUPLICATE
    assert jobs.enqueue_many(conn, q, [(jid, again)]) == [Outcome.DUPLICATE]
    assert jobs.schedule_many(conn, q, [(jid, again, "in", 1000)]) == [Outcome.DUPLICATE]
    assert jobs.enqueue_many(conn, q, [(jid, again, {"priority": 5})]) == [Outcome.DUPLICATE]
    assert snapshot(r, q) == before  # nothing written, not even a counter
    assert jobs.claim(conn, q, 30_000) is None
    # @admit_many: a plain item beside one with options (its own, fresh id: admitted)
    fresh = ids.mint()
    assert jobs.enqueue_many(conn, q, [(jid, again), (fresh, again, {"priority": 5})]) == [
        Outcome.DUPLICATE, Outcome.ENQUEUED]
    assert jobs.get(conn, q, jid) is None and jobs.get(conn, q, fresh) is not None


def test_the_mark_lapses_after_its_window(conn: Connector, r: valkey.Valkey) -> None:
    q = fresh_queue()
    jid, old = ids.mint(), ids.mint()
    run_once(conn, q, jid, encode("t"))
    # the delete happened SEEN_MS ago (the mark's score is the SERVER ms of the delete)
    now_ms = int(r.time()[0]) * 1000
    r.zadd(k(q, "seen"), {jid: now_ms - SEEN_MS - 5, old: now_ms - SEEN_MS - 5})
    # admitted again, it runs again; its delete marks it anew and trims what is older
    run_once(conn, q, jid, encode("t"))
    assert r.zscore(k(q, "seen"), old) is None
    assert (r.zscore(k(q, "seen"), jid) or 0) >= now_ms


def test_a_kept_row_leaves_no_mark(conn: Connector, r: valkey.Valkey) -> None:
    q = fresh_queue()
    jid = ids.mint()
    jobs.enqueue(conn, q, jid, encode("t"))
    claim = jobs.claim(conn, q, 30_000)
    assert claim is not None
    jobs.ack(conn, q, jid, claim.token, True)
    assert r.exists(k(q, "seen")) == 0  # the kept row itself makes a retry a duplicate
    assert jobs.enqueue(conn, q, jid, encode("t")) == Outcome.DUPLICATE


@pytest.mark.parametrize("many", [False, True], ids=["ack", "ackmany"])
def test_a_job_kept_only_for_its_result_keeps_its_task_and_runs(
        conn: Connector, r: valkey.Valkey, many: bool) -> None:
    q = fresh_queue()
    jid = ids.mint()
    # a nested "task" key in the arguments comes before the top-level one (sorted keys)
    runs = run_once(conn, q, jid, encode("shop.total", [{"task": "decoy"}], {"n": 2}),
                    result=b"90", many=many)
    kept = r.hgetall(k(q, "kept:" + jid))
    assert kept[b"task"] == b"shop.total" and kept[b"runs"] == str(runs).encode()
    assert 0 < r.pttl(k(q, "kept:" + jid)) <= 60_000
    info = status.read(conn, [q], jid)
    assert info is not None
    assert (info.state, info.task, info.runs, info.result) == ("completed", "shop.total", 1, 90)
    assert info.completed_at_ms is not None


def test_an_encrypted_payload_names_its_task_from_its_header(conn: Connector,
                                                             r: valkey.Valkey) -> None:
    q = fresh_queue()
    jid = ids.mint()
    fmt = Format(codec=codecs.chain(codecs.Zlib(), codecs.Fernet([codecs.Fernet.generate_key()])))
    run_once(conn, q, jid, encode("vault.open", ["secret"], fmt=fmt), result=b"1")
    assert r.hget(k(q, "kept:" + jid), "task") == b"vault.open"
    info = status.read(conn, [q], jid)
    assert info is not None and info.task == "vault.open" and info.runs == 1


def test_no_result_kept_leaves_no_kept_hash(conn: Connector, r: valkey.Valkey) -> None:
    q = fresh_queue()
    jid = ids.mint()
    run_once(conn, q, jid, encode("t"))
    assert r.exists(k(q, "kept:" + jid)) == 0


@pytest.mark.parametrize("payload", [
    b'{"args":[],"kwargs":{},"task":"a\\u00e9b"}',  # escapes kept as spelled
    b"\x00EMQ1" + b'{"c":["zlib"],"t":"env.task"}\n' + b'"task":"not-this"',
    b'{"args":["\\"task\\":\\"x"],"task":"real","timeout":5}',
    b"not json at all",
    b'{"task":"unterminated',
])
def test_script_and_module_keep_the_same_bytes(r: valkey.Valkey, payload: bytes) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    jid = ids.mint()
    for q in (q4, q6):
        r.hset(k(q, "job:" + jid), mapping={"state": "active", "attempts": "3",
                                             "payload": payload})
        r.zadd(k(q, "active"), {jid: 1})
    assert send(r, "EVAL", scripts.source("ack"), 3, k(q4, "job:" + jid), k(q4, "active"),
                k(q4, "completed"), jid, 3, "0", b"[1]", 60_000) == 1
    assert send(r, "EMQ.ACK", 3, k(q6, "job:" + jid), k(q6, "active"), k(q6, "completed"),
                jid, 3, "0", b"[1]", 60_000) == 1
    h4, h6 = r.hgetall(k(q4, "kept:" + jid)), r.hgetall(k(q6, "kept:" + jid))
    assert {f: v for f, v in h4.items() if f != b"completed_at"} == {
        f: v for f, v in h6.items() if f != b"completed_at"}
    assert h6[b"runs"] == b"3"
    assert set(snapshot(r, q4)) == set(snapshot(r, q6)) == {
        "kept:" + jid, "result:" + jid, "seen", "stats"}


def test_a_claim_id_is_recorded_natively_as_the_script_records_it(r: valkey.Valkey) -> None:

    q4, q6 = fresh_queue(), fresh_queue()
    jid = ids.mint()
    for q in (q4, q6):
        r.hset(k(q, "job:" + jid), mapping={"state": "pending", "attempts": "0",
                                             "payload": b"p"})
        r.zadd(k(q, "pending"), {jid: 0})
    got4 = send(r, "EVAL", scripts.source("claim"), 2, k(q4, "pending"), k(q4, "active"),
                base(q4), 60_000, 5, "c1")
    got6 = send(r, "EMQ.CLAIM", 2, k(q6, "pending"), k(q6, "active"), base(q6),
                60_000, 5, "c1")
    assert got4 == got6 == [jid.encode(), 1, b"p"]
    assert r.hgetall(k(q4, "claim:c1")) == r.hgetall(k(q6, "claim:c1")) == {jid.encode(): b"1"}
    assert 0 < r.pttl(k(q6, "claim:c1")) <= 60_000
    # the id used again: the module hands the replay to the script, writing nothing
    before = snapshot(r, q6)
    again = send(r, "EMQ.CLAIM", 2, k(q6, "pending"), k(q6, "active"), base(q6),
                 60_000, 5, "c1")
    assert str(again) == "EMQSTATE claim id not native" and snapshot(r, q6) == before


def test_a_claim_sent_again_with_its_id_answers_the_same_jobs_at_wire_6(
        conn: Connector) -> None:
    q = fresh_queue()
    sent = [ids.mint() for _ in range(3)]
    for jid in sent:
        jobs.enqueue(conn, q, jid, b"{}")
    first = jobs.claim_many(conn, q, 30_000, 2, "c1")
    assert [c.id for c in first] == sent[:2]
    assert jobs.claim_many(conn, q, 30_000, 2, "c1") == first  # its reply was lost
    assert [c.id for c in jobs.claim_many(conn, q, 30_000, 2, "c2")] == sent[2:]


def test_a_flow_admitted_again_after_its_node_ran_and_was_deleted_writes_nothing(
        conn: Connector, r: valkey.Valkey) -> None:
    from echomq.verbs import flows
    from echomq.verbs.flows import Node

    q = fresh_queue()
    node = Node(q, ids.mint(), encode("t"))
    assert flows.admit(conn, node)[node.id] == "enqueued"
    claim = jobs.claim(conn, q, 30_000)
    assert claim is not None and claim.id == node.id
    jobs.ack(conn, q, node.id, claim.token, False)
    before = snapshot(r, q)
    assert flows.admit(conn, node)[node.id] == "duplicate"  # the retry of the same flow
    assert snapshot(r, q) == before and jobs.get(conn, q, node.id) is None
