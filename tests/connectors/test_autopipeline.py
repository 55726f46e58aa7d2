"""Auto-pipelining on the AsyncConnector: the script steps of one loop iteration share a
round trip, and every caller still gets exactly its own reply or error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import valkey

from echomq import AsyncConnector, native
from echomq.core import errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import jobs

WIRES = [4, 6] if native.available() else [4]


def clients(raw: valkey.Valkey) -> int:
    return int(raw.info("clients")["connected_clients"])


@pytest.mark.parametrize("wire", WIRES)
def test_mixed_batch_each_caller_gets_its_own_outcome(server, wire, queue):
    raw = valkey.Valkey.from_url(server.url)

    async def main() -> tuple[list[Any], list[str], int]:
        conn = await AsyncConnector.connect(server.url, wire=wire)
        try:
            assert conn.auto_pipeline
            taken = ids.mint()
            await jobs.enqueue(conn, queue, taken, b"first")
            before = clients(raw)
            good = [ids.mint() for _ in range(40)]
            calls = []
            for i, jid in enumerate(good):
                calls.append(jobs.enqueue(conn, queue, jid, f"p{i}".encode()))
                if i % 10 == 3:  # a refusal between good calls: EMQKIND from the script
                    calls.append(jobs.enqueue(conn, queue, f"TASK{i}", b"x"))
                if i % 10 == 7:  # a duplicate id: the script answers 0
                    calls.append(jobs.enqueue(conn, queue, taken, b"again"))
            got = await asyncio.gather(*calls, return_exceptions=True)
            # 52 concurrent calls took no more than one extra connection: one pipeline
            grew = clients(raw) - before
            return got, good, grew
        finally:
            await conn.close()

    got, good, grew = asyncio.run(main())
    assert grew <= 1
    kinds = [g for g in got if isinstance(g, BaseException)]
    assert len(kinds) == 4
    assert all(isinstance(k, errors.KindError)
               and str(k) == "EMQKIND job id must be JOB-namespaced" for k in kinds)
    assert [g for g in got if g == Outcome.DUPLICATE] == [Outcome.DUPLICATE] * 4
    assert [g for g in got if g == Outcome.ENQUEUED] == [Outcome.ENQUEUED] * 40
    # each good call's own payload is on its own row; the refused and duplicates wrote none
    for i, jid in enumerate(good):
        assert raw.hget(keyspace.job_key(queue, jid), "payload") == f"p{i}".encode()
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 41
    assert raw.exists(*(keyspace.job_key(queue, f"TASK{i}") for i in (3, 13, 23, 33))) == 0
    raw.close()


@pytest.mark.parametrize("wire", WIRES)
def test_noscript_inside_an_auto_pipeline_reloads_and_resends(server, wire, queue):
    raw = valkey.Valkey.from_url(server.url)

    async def main() -> list[Any]:
        conn = await AsyncConnector.connect(server.url, wire=wire)
        try:
            await jobs.enqueue(conn, queue, ids.mint(), b"warm")  # the script is loaded
            raw.script_flush()
            now = [jobs.enqueue(conn, queue, ids.mint(), b"x") for _ in range(10)]
            later = [jobs.enqueue_in(conn, queue, ids.mint(), b"y", 60_000) for _ in range(5)]
            bad = [jobs.enqueue(conn, queue, "NOTAJOB", b"z")]
            return await asyncio.gather(*now, *later, *bad, return_exceptions=True)
        finally:
            await conn.close()

    got = asyncio.run(main())
    assert got[:10] == [Outcome.ENQUEUED] * 10
    assert got[10:15] == [Outcome.SCHEDULED] * 5
    assert isinstance(got[15], errors.KindError)
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 11
    assert raw.zcard(keyspace.queue_key(queue, "schedule")) == 5
    raw.close()


def test_a_call_alone_in_its_iteration_and_auto_pipeline_off(server, queue):
    raw = valkey.Valkey.from_url(server.url)

    async def main() -> None:
        conn = await AsyncConnector.connect(server.url, auto_pipeline=False)
        assert not conn.auto_pipeline
        jid = ids.mint()
        assert await jobs.enqueue(conn, queue, jid, b"a") == Outcome.ENQUEUED
        assert await jobs.enqueue(conn, queue, jid, b"a") == Outcome.DUPLICATE
        await conn.close()
        conn = await AsyncConnector.connect(server.url)
        with pytest.raises(errors.KindError):
            await jobs.enqueue(conn, queue, "NOPE", b"a")
        claim = await jobs.claim(conn, queue, 30_000)
        assert claim is not None and claim.id == jid
        with pytest.raises(errors.StaleError):
            await jobs.ack(conn, queue, jid, claim.token + 1)
        await jobs.ack(conn, queue, jid, claim.token)
        await conn.close()

    asyncio.run(main())
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 0
    raw.close()


@pytest.mark.parametrize("wire", WIRES)
def test_a_cluster_connector_does_not_auto_pipeline_across_slots(cluster, wire):
    queues = [f"ap{wire}-{i}" for i in range(9)]
    owners = {cluster.owner(keyspace.queue_key(q, "pending")).port for q in queues}
    assert len(owners) > 1  # the calls below really span nodes

    async def main() -> list[Any]:
        conn = await AsyncConnector.connect(cluster.url, wire=wire)
        try:
            assert not conn.auto_pipeline
            calls = [jobs.enqueue(conn, q, ids.mint(), b"x") for q in queues for _ in range(3)]
            got = await asyncio.gather(*calls)
            counts = await asyncio.gather(*(jobs.counts(conn, q) for q in queues))
            return [got, [c["pending"] for c in counts]]
        finally:
            await conn.close()

    got, pending = asyncio.run(main())
    assert got == [Outcome.ENQUEUED] * 27
    assert pending == [3] * 9


def test_a_lone_call_goes_out_at_once_and_calls_behind_it_share_one_pipeline(server, queue):
    """An idle connector sends a call in its caller's task (no loop turn waited, no batch):
    sequential awaited calls make no flush at all. Calls issued while one is in flight
    queue behind it and go out as one pipeline, each with its own outcome."""
    raw = valkey.Valkey.from_url(server.url)

    async def main() -> tuple[int, list[Any], int]:
        conn = await AsyncConnector.connect(server.url)
        try:
            pipe = conn._pipeline
            for _ in range(20):
                assert await jobs.enqueue(conn, queue, ids.mint(), b"one") == Outcome.ENQUEUED
            lone = pipe.flushes
            taken = ids.mint()
            first = asyncio.ensure_future(jobs.enqueue(conn, queue, taken, b"first"))
            await asyncio.sleep(0)  # the first call is on the wire now
            behind = [jobs.enqueue(conn, queue, ids.mint(), b"behind") for _ in range(30)]
            behind.append(jobs.enqueue(conn, queue, taken, b"dup"))
            behind.append(jobs.enqueue(conn, queue, "NOTAJOB", b"bad"))
            got = [await first, *await asyncio.gather(*behind, return_exceptions=True)]
            return lone, got, pipe.flushes - lone
        finally:
            await conn.close()

    lone, got, flushed = asyncio.run(main())
    assert lone == 0
    assert flushed == 1
    assert got[:31] == [Outcome.ENQUEUED] * 31
    assert got[31] == Outcome.DUPLICATE
    assert isinstance(got[32], errors.KindError)
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 51
    raw.close()
