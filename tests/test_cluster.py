"""A real Valkey Cluster on loopback: every transition routes to the queue's slot owner,
on both connectors and both wires; a failover loses nothing written and the connector
reloads its scripts on the promoted replica (NOSCRIPT) without being recreated."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from echomq import AsyncConnector, Connector, errors, ids, jobs, keyspace, native
from echomq.cluster import LocalCluster

WIRES = [4, 6] if native.available() else [4]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(masters=3, replicas=0) as cl:
        yield cl


def lifecycle(conn, queue: str) -> dict[str, int]:
    a, b = ids.mint(), ids.mint()
    assert jobs.enqueue_in(conn, queue, a, b"x", 0) == "scheduled"
    assert jobs.enqueue_many(conn, queue, [(b, b"y")]) == ["enqueued"]
    assert jobs.promote(conn, queue, 10) == 1
    first = jobs.claim(conn, queue, 30_000)
    assert first is not None and first.id == a  # mint order across the release
    second = jobs.claim(conn, queue, 30_000)
    assert second is not None and second.id == b
    jobs.delay(conn, queue, a, first.token, 60_000)
    jobs.ack(conn, queue, b, second.token)
    with pytest.raises(errors.StaleError):
        jobs.ack(conn, queue, b, second.token + 1)
    return jobs.counts(conn, queue)


@pytest.mark.parametrize("wire", WIRES)
def test_transitions_route_to_each_queues_slot(cluster, wire):
    conn = Connector.connect(cluster.url, wire=wire, cluster=True)
    queues = [f"c{wire}-{i}" for i in range(12)]
    owners = {cluster.owner(keyspace.queue_key(q, "pending")).port for q in queues}
    assert len(owners) > 1  # the queues really spread over several nodes
    for q in queues:
        assert lifecycle(conn, q) == {
            "pending": 0, "scheduled": 1, "active": 0, "dead": 0, "completed": 1
        }
    conn.close()


@pytest.mark.parametrize("wire", WIRES)
def test_async_connector_on_a_cluster(cluster, wire):
    async def main() -> dict[str, int]:
        conn = await AsyncConnector.connect(cluster.url, wire=wire, cluster=True)
        try:
            q = f"ac{wire}"
            jid = ids.mint()
            assert await jobs.enqueue_in(conn, q, jid, b"x", 0) == "scheduled"
            assert await jobs.promote(conn, q, 5) == 1
            got = await jobs.claim_many(conn, q, 10_000, 5)
            assert [c.id for c in got] == [jid]
            assert await jobs.ack_many(conn, q, [(jid, got[0].token)]) == [None]
            return await jobs.counts(conn, q)
        finally:
            await conn.close()

    assert asyncio.run(main())["completed"] == 1


def test_failover_keeps_data_and_scripts_reload():
    with LocalCluster(masters=3, replicas=1) as cl:
        conn = Connector.connect(cl.url, cluster=True)
        q = "failover"
        jid = ids.mint()
        assert jobs.enqueue_in(conn, q, jid, b"kept", 60_000) == "scheduled"
        owner = cl.owner(keyspace.queue_key(q, "schedule"))
        assert cl.client(owner).execute_command("WAIT", 1, 2000) == 1
        owner.kill()
        deadline = time.monotonic() + 20
        while True:
            try:
                # a write through the promoted replica: it never saw SCRIPT LOAD
                outcome = jobs.enqueue(conn, q, ids.mint(), b"after")
                break
            except errors.WireError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert outcome == "enqueued"
        assert jobs.get(conn, q, jid)["payload"] == b"kept"
        assert cl.owner(keyspace.queue_key(q, "schedule")).port != owner.port
        conn.close()
