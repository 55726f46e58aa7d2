"""EMQ.CLAIM, EMQ.ACK and EMQ.ACKMANY, the worker's hot path natively (wire 6 sends them for
every claim and ack).

Raw commands on a module-loaded server beside the scripts: what they write and answer for a
plain queue equals the scripts' key by key; every refusal and every hand-back ("... not
native": a case left to the script) writes nothing; the verbs then send the script, so the
caller gets the script's answer; the connectors send the module at wire 6 only.
"""

from __future__ import annotations

import time

import pytest
import valkey

from echomq import Connector, scripts
from echomq.core import errors, ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import groups, jobs
from tests.support.native import (
    J1,
    J2,
    KIND,
    WRONGTYPE,
    base,
    fresh_queue,
    k,
    refused,
    send,
    snapshot,
)

LEASE = 60_000


def claim(q: str, count: int = 5, lease: object = LEASE) -> tuple:
    return ("EMQ.CLAIM", 2, k(q, "pending"), k(q, "active"), base(q), lease, count)


def script_claim(r: valkey.Valkey, q: str, count: int = 5) -> object:
    return send(r, "EVAL", scripts.source("claim"), 2, k(q, "pending"), k(q, "active"),
                base(q), LEASE, count)


def ack(q: str, job: str, token: object, keep: str = "1", *result: object) -> tuple:
    return ("EMQ.ACK", 3, k(q, "job:" + job), k(q, "active"), k(q, "completed"), job,
            token, keep, *result)


def script_ack(r: valkey.Valkey, q: str, job: str, token: object, keep: str = "1",
               *result: object) -> object:
    return send(r, "EVAL", scripts.source("ack"), 3, k(q, "job:" + job), k(q, "active"),
                k(q, "completed"), job, token, keep, *result)


def ackmany(q: str, flag: str, *entries: object) -> tuple:
    return ("EMQ.ACKMANY", 2, k(q, "active"), k(q, "completed"), base(q), flag, *entries)


def script_ackmany(r: valkey.Valkey, q: str, flag: str, *entries: object) -> object:
    return send(r, "EVAL", scripts.source("ack_many"), 2, k(q, "active"), k(q, "completed"),
                base(q), flag, *entries)


def clockless(snap: dict) -> dict:
    """A snapshot with what the clock priced blanked: lease and completion scores, and
    completed_at (the two sides ran ms apart)."""
    out = {}
    for key, (kind, content) in snap.items():
        if key in ("active", "completed", "seen"):
            content = {m: "<clock>" for m in content}
        elif kind == "hash" and "completed_at" in content:
            content = {**content, "completed_at": "<clock>"}
        out[key] = (kind, content)
    return out


def fill(r: valkey.Valkey, q: str, n: int = 4) -> list[str]:
    jobs_ = [f"JOB01{chr(65 + i) * 24}" for i in range(n)]
    for i, j in enumerate(jobs_):
        r.hset(k(q, "job:" + j), mapping={"state": "pending", "attempts": str(i % 2),
                                           "payload": f"p{i}"})
        r.zadd(k(q, "pending"), {j: 0})
    return jobs_


def test_claim_and_acks_write_what_the_scripts_write(r: valkey.Valkey) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    for q in (q4, q6):
        fill(r, q, 6)
        r.hset(k(q, "job:JOB01" + "C" * 24), "unique", "u")
        r.set(k(q, "unique:u"), "JOB01" + "C" * 24)
        r.hset(k(q, "job:JOB01" + "D" * 24), "notify", "60000")
    got4 = script_claim(r, q4, 4)
    got6 = send(r, *claim(q6, 4))
    assert got6 == got4 and len(got6) == 12
    assert isinstance(got6[1], int) and got6[1] == 1  # the token: attempts + 1
    assert clockless(snapshot(r, q6)) == clockless(snapshot(r, q4))
    assert r.llen(k(q6, "wake")) == 1  # work left behind wakes the next consumer
    held = [(got6[i].decode(), got6[i + 1]) for i in range(0, 12, 3)]
    (a, ta), (b, tb), (c, tc), (d, td) = held
    assert script_ack(r, q4, a, ta, "1") == send(r, *ack(q6, a, ta, "1")) == 1
    assert script_ack(r, q4, b, tb, "0", b"[1]", 60_000) == send(
        r, *ack(q6, b, tb, "0", b"[1]", 60_000)) == 1
    entries = (c, tc, d, td, c, tc, "JOBnope", 1, "x", 1)
    assert script_ackmany(r, q4, "1", *entries) == send(r, *ackmany(q6, "1", *entries)) == [
        1, 1, b"EMQSTATE ack not active", b"EMQSTALE job gone", KIND.encode()]
    assert clockless(snapshot(r, q6)) == clockless(snapshot(r, q4))
    s6 = snapshot(r, q6)
    assert "unique:u" not in s6  # released with its owner's end
    assert s6["done:JOB01" + "D" * 24] == ("list", [b"completed"])
    assert s6["result:" + b] == ("string", b"[1]")
    assert s6["stats"][1]["completed"] == b"4"


def test_ackmany_with_results_and_deleted_rows(r: valkey.Valkey) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    for q in (q4, q6):
        fill(r, q, 3)
    h4, h6 = script_claim(r, q4, 3), send(r, *claim(q6, 3))
    e = []
    for i in range(0, 9, 3):
        e += [h6[i].decode(), h6[i + 1], b"[%d]" % i, 60_000 if i else ""]
    assert script_ackmany(r, q4, "0r", *e) == send(r, *ackmany(q6, "0r", *e)) == [1, 1, 1]
    assert clockless(snapshot(r, q6)) == clockless(snapshot(r, q4))
    assert h4 == h6


@pytest.mark.parametrize("setup, text", [
    (lambda r, q: r.hset(k(q, "rate"), mapping={"max": 5, "ms": 1000}),
     "EMQSTATE claim rate not native"),
    (lambda r, q: (r.zadd(k(q, "ring"), {"g": 1}), r.set(k(q, "g:g"), "x")),
     "EMQSTATE claim ring not native"),
    (lambda r, q: r.set(k(q, "limit"), "x"), "EMQSTATE claim limit not native"),
    (lambda r, q: r.set(k(q, "gwait"), "x"), "EMQSTATE claim ring not native"),
    (lambda r, q: r.hset(k(q, "job:" + J1), "cancel", 1), "EMQSTATE claim row not native"),
    (lambda r, q: r.hset(k(q, "job:" + J1), "expires", 1), "EMQSTATE claim row not native"),
    (lambda r, q: r.hset(k(q, "job:" + J1), "state", "scheduled"),
     "EMQSTATE claim row not native"),
    (lambda r, q: r.hset(k(q, "job:" + J1), "attempts", "x"), "EMQSTATE claim row not native"),
    (lambda r, q: r.hdel(k(q, "job:" + J1), "payload"), "EMQSTATE claim row not native"),
    (lambda r, q: r.delete(k(q, "job:" + J1)), "EMQSTATE claim row not native"),
    (lambda r, q: r.set(k(q, "wake"), "x"), "EMQSTATE claim row not native"),
])
def test_claim_hands_back_what_the_script_does_and_writes_nothing(r: valkey.Valkey, q: str,
                                                                  setup, text) -> None:
    r.hset(k(q, "job:" + J1), mapping={"state": "pending", "attempts": "0", "payload": "p"})
    r.zadd(k(q, "pending"), {J1: 0})
    setup(r, q)
    refused(r, q, claim(q), text)


def test_a_gwait_entry_still_ahead_does_not_stop_the_native_claim(r: valkey.Valkey,
                                                                  q: str) -> None:
    fill(r, q, 1)
    r.zadd(k(q, "gwait"), {"g": 40_000_000_000_000})
    assert len(send(r, *claim(q))) == 3


def test_a_paused_or_blocked_queue_claims_nothing_and_writes_nothing(r: valkey.Valkey,
                                                                     q: str) -> None:
    fill(r, q, 2)
    for flag in ("paused", "blocked_until"):
        r.set(k(q, flag), "1")
        before = snapshot(r, q)
        assert send(r, *claim(q)) == [] == script_claim(r, q)
        assert snapshot(r, q) == before
        r.delete(k(q, flag))
    r.delete(k(q, "pending"))
    assert send(r, *claim(q)) == []


@pytest.mark.parametrize("args, text", [
    (claim("q", lease=0), "ERR EMQ.CLAIM lease must be a positive integer"),
    (claim("q", count=0), "ERR EMQ.CLAIM count must be a positive integer"),
    (("EMQ.CLAIM", 1, k("q", "pending"), k("q", "active"), base("q"), 1, 1),
     "ERR EMQ.CLAIM numkeys must be 2"),
    (ackmany("q", "2", J1, 1), "ERR EMQ.ACKMANY flag must be 1, 0, 1r or 0r"),
    (ackmany("q", "1r", J1, 1), "ERR EMQ.ACKMANY entries must come in whole"),
    (ack("q", J1, 1, "1", b"r", 0), "ERR EMQ.ACK keep ms must be a positive integer"),
    (ack("q", "XJOB", 1), KIND),
])
def test_bad_input_is_refused_before_any_write(r: valkey.Valkey, args: tuple, text: str) -> None:
    fill(r, "q", 1)
    refused(r, "q", args, text)


def held(r: valkey.Valkey, q: str) -> tuple[str, int]:
    """One job claimed natively: its id and token."""
    fill(r, q, 1)
    got = send(r, *claim(q, 1))
    return got[0].decode(), got[1]


@pytest.mark.parametrize("fields, text", [
    ({"parent": "emq:{p}:job:JOB01X"}, "EMQSTATE ack flow not native"),
    ({"flow": "1"}, "EMQSTATE ack flow not native"),
    ({"watched": "1"}, "EMQSTATE ack flow not native"),
    ({"notify": "soon"}, "EMQSTATE ack row not native"),
])
def test_acks_hand_back_flows_and_odd_rows(r: valkey.Valkey, q: str, fields: dict,
                                                 text: str) -> None:
    job, token = held(r, q)
    r.hset(k(q, "job:" + job), mapping=fields)
    refused(r, q, ack(q, job, token), text)
    refused(r, q, ackmany(q, "1", job, token), text)


def test_ack_refusals_are_the_scripts_texts(r: valkey.Valkey, q: str) -> None:
    job, token = held(r, q)
    refused(r, q, ack(q, job, token + 1), "EMQSTALE ack token mismatch")
    refused(r, q, ack(q, J2, 1), "EMQSTALE job gone")
    r.zrem(k(q, "active"), job)
    refused(r, q, ack(q, job, token), "EMQSTATE ack not active")
    r.zadd(k(q, "active"), {job: 1})
    r.hset(k(q, "stats"), "completed", "many")
    refused(r, q, ack(q, job, token), "EMQSTATE ack row not native")
    r.delete(k(q, "stats"))
    r.set(k(q, "active"), "x")
    refused(r, q, ack(q, job, token), WRONGTYPE)


def test_the_verbs_send_the_script_for_a_hand_back(srv: EmbeddedServer) -> None:
    q = fresh_queue()
    with Connector.connect(srv.url, wire=6) as c6:
        def counts() -> dict[str, tuple[int, int]]:
            stats = c6.client.info("commandstats")
            return {n: (int(stats.get(f"cmdstat_{n}", {}).get("calls", 0)),
                        int(stats.get(f"cmdstat_{n}", {}).get("failed_calls", 0)))
                    for n in ("emq.claim", "emq.ack", "emq.ackmany", "evalsha")}

        flat, lane = ids.mint(), ids.mint()
        jobs.enqueue(c6, q, flat, b"f")
        jobs.enqueue(c6, q, lane, b"g", group="tenant")
        c6.client.hset(k(q, "rate"), mapping={"max": 100, "ms": 1000})
        before = counts()
        got = jobs.claim_many(c6, q, LEASE, 5)  # a queue rate: handed back, the script claims
        assert sorted(c.id for c in got) == sorted([flat, lane])
        after = counts()
        assert after["emq.claim"][1] == before["emq.claim"][1] + 1
        assert after["evalsha"][0] > before["evalsha"][0]
        by_id = {c.id: c for c in got}
        refusals, more = jobs.ack_and_claim(c6, q, [(i, c.token) for i, c in by_id.items()],
                                            LEASE, 1)
        assert refusals == [None, None] and more == []
        assert groups.stats(c6, q)["tenant"].active == 0  # EMQ.ACKMANY lowered it
        assert jobs.counts(c6, q)["active"] == 0
        with pytest.raises(errors.StateError, match=r"^EMQSTATE ack not active$"):
            jobs.ack(c6, q, flat, by_id[flat].token)  # kept completed: a second ack


def test_the_module_runs_at_wire_6_only(srv: EmbeddedServer, r: valkey.Valkey) -> None:
    for wire in (4, 6):
        q = fresh_queue()
        with Connector.connect(srv.url, wire=wire) as conn:
            r.config_resetstat()
            jobs.enqueue_many(conn, q, [(ids.mint(), b"p") for _ in range(3)])
            got = jobs.claim_many(conn, q, LEASE, 3)
            jobs.ack(conn, q, got[0].id, got[0].token)
            jobs.ack_and_claim(conn, q, [(c.id, c.token) for c in got[1:]], LEASE, 1)
            stats = r.info("commandstats")
        native = sum(int(stats.get(f"cmdstat_emq.{n}", {}).get("calls", 0))
                     for n in ("claim", "ack", "ackmany"))
        assert native == (4 if wire == 6 else 0)


def test_a_queue_that_handed_back_sends_the_script_for_a_while(srv: EmbeddedServer) -> None:
    q = fresh_queue()
    with Connector.connect(srv.url, wire=6) as c6:
        c6.memory.handbacks.hold_s = 0.3
        def failed() -> tuple[int, int]:
            got = c6.client.info("commandstats").get("cmdstat_emq.claim", {})
            return int(got.get("calls", 0)), int(got.get("failed_calls", 0))

        for i in range(6):
            jobs.enqueue(c6, q, ids.mint(), b"g", group=f"g{i % 2}")
        c6.client.hset(k(q, "rate"), mapping={"max": 100, "ms": 1000})  # the script's
        calls0, failed0 = failed()
        assert len(jobs.claim_many(c6, q, LEASE, 1)) == 1  # handed back, then the script
        assert len(jobs.claim_many(c6, q, LEASE, 1)) == 1  # the script straight away
        assert failed() == (calls0 + 1, failed0 + 1)
        time.sleep(0.35)
        assert len(jobs.claim_many(c6, q, LEASE, 1)) == 1  # the native command tried again
        assert failed() == (calls0 + 2, failed0 + 2)
        with Connector.connect(srv.url, wire=6) as other:  # its own memory: native first
            assert len(jobs.claim_many(other, q, LEASE, 1)) == 1
            assert failed() == (calls0 + 3, failed0 + 3)


def test_an_async_connector_remembers_its_own_hand_backs(srv: EmbeddedServer) -> None:
    import asyncio

    from echomq import AsyncConnector

    q = fresh_queue()
    r = valkey.Valkey.from_url(srv.url)

    async def main() -> tuple[int, int]:
        conn = await AsyncConnector.connect(srv.url, wire=6)
        try:
            for i in range(4):
                await jobs.enqueue(conn, q, ids.mint(), b"g", group=f"g{i % 2}")
            r.hset(k(q, "rate"), mapping={"max": 100, "ms": 1000})  # the script's
            got = await jobs.claim_many(conn, q, LEASE, 1)  # handed back, then the script
            got += await jobs.claim_many(conn, q, LEASE, 1)  # the script straight away
            for c in got:  # a recurrence occurrence behind each: the script's to release
                r.hset(k(q, "job:" + c.id), "follower", "JOB01" + "Z" * 24)
            acks = await jobs.ack_many(conn, q, [(c.id, c.token) for c in got])  # a batch
            assert acks == [None, None] and len(got) == 2
            return len(conn.memory.handbacks.until), len(got)
        finally:
            await conn.close()

    def failed(n: str) -> int:
        return int(r.info("commandstats").get(f"cmdstat_emq.{n}", {}).get("failed_calls", 0))

    claims0, acks0 = failed("claim"), failed("ackmany")
    remembered, _ = asyncio.run(main())
    r.close()
    assert failed("claim") == claims0 + 1  # one refused native claim, not two
    assert failed("ackmany") == acks0 + 1  # a follower's ack hands back once too
    assert remembered == 2  # EMQ.CLAIM and EMQ.ACKMANY on this queue


def test_a_deadline_still_ahead_is_dropped_as_the_script_drops_it(r: valkey.Valkey) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    far = 40_000_000_000_000
    for q in (q4, q6):
        jobs_ = fill(r, q, 3)
        for j in jobs_[:2]:
            r.hset(k(q, "job:" + j), "expires", far)
            r.zadd(k(q, "deadlines"), {j: far})
    assert script_claim(r, q4, 3) == send(r, *claim(q6, 3))
    s6 = snapshot(r, q6)
    assert clockless(s6) == clockless(snapshot(r, q4))
    assert "deadlines" not in s6  # emptied: every claimed job kept no deadline
    assert all("expires" not in v[1] for key, v in s6.items() if key.startswith("job:"))


def test_a_debounced_job_releases_its_key_and_a_follower_is_handed_back(
        r: valkey.Valkey) -> None:
    q4, q6 = fresh_queue(), fresh_queue()
    for q in (q4, q6):
        (job,) = fill(r, q, 1)
        r.hset(k(q, "job:" + job), "debounce", "key")
        r.hset(k(q, "debounce:key"), mapping={"id": job, "first": 1})
    h4, h6 = script_claim(r, q4, 1), send(r, *claim(q6, 1))
    assert h4 == h6
    job, token = h6[0].decode(), h6[1]
    assert script_ack(r, q4, job, token) == send(r, *ack(q6, job, token)) == 1
    assert clockless(snapshot(r, q6)) == clockless(snapshot(r, q4))
    assert "debounce:key" not in snapshot(r, q6)
    q = fresh_queue()
    job, token = held(r, q)
    r.hset(k(q, "job:" + job), "follower", "JOB01" + "Z" * 24)
    refused(r, q, ack(q, job, token), "EMQSTATE ack flow not native")
