"""A real Valkey Cluster on loopback: every transition routes to the queue's slot owner,
on both connectors and both wires; a failover loses nothing written and the connector
reloads its scripts on the promoted replica (NOSCRIPT) without being recreated."""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
import time

import pytest

from echomq import AsyncConnector, Connector, errors, ids, jobs, keyspace, native
from echomq.connectors import urls
from echomq.embedded.cluster import LocalCluster
from echomq.tasks.app import App
from echomq.verbs import discovery, registry

WIRES = [4, 6] if native.available() else [4]


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
    conn = Connector.connect(cluster.url, wire=wire)
    queues = [f"c{wire}-{i}" for i in range(12)]
    owners = {cluster.owner(keyspace.queue_key(q, "pending")).port for q in queues}
    assert len(owners) > 1  # the queues really spread over several nodes
    for q in queues:
        assert lifecycle(conn, q) == {
            "pending": 0, "scheduled": 1, "active": 0, "dead": 0, "completed": 1,
            "cancelled": 0,
        }
    conn.close()


@pytest.mark.parametrize("wire", WIRES)
def test_async_connector_on_a_cluster(cluster, wire):
    async def main() -> dict[str, int]:
        conn = await AsyncConnector.connect(cluster.url, wire=wire)
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


@pytest.mark.slow
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


# -- one URL for a cluster ---------------------------------------------------------------


def test_cluster_url_forms_parse_before_any_io():
    t = urls.parse("valkey+cluster://:p%40ss@127.0.0.1:7000,127.0.0.1:7001/0?socket_timeout=5")
    assert t.cluster and not t.tls
    assert t.nodes == (("127.0.0.1", 7000), ("127.0.0.1", 7001))
    assert t.url == "valkey://:p%40ss@127.0.0.1:7000?socket_timeout=5"
    t = urls.parse("valkeys+cluster://u:pw@[::1]:7000")
    assert t.cluster and t.tls and t.nodes == (("::1", 7000),)
    assert t.url == "valkeys://u:pw@[::1]:7000"
    assert not urls.parse("valkey://127.0.0.1:6379/0").cluster
    assert urls.cluster_url([("127.0.0.1", 1), ("127.0.0.1", 2)], password="a b") == (
        "valkey+cluster://:a%20b@127.0.0.1:1,127.0.0.1:2")
    assert urls.redact("valkey+cluster://:secret@h:1,h:2") == "valkey+cluster://:***@h:1,h:2"
    for bad in ("valkey+cluster://", "valkey+cluster://h:1/3", "valkey+cluster://h:port",
                "memcached://h:1", "valkey+cluster://h:70000", "127.0.0.1:6379"):
        with pytest.raises(ValueError):
            Connector.connect(bad)


def test_local_cluster_url_is_the_cluster_form(cluster):
    assert cluster.url.startswith("valkey+cluster://:")  # the session cluster has a password
    assert len(urls.parse(cluster.url).nodes) == 6
    with pytest.raises(errors.WireError):  # a wrong password is a clear failure at connect
        Connector.connect(cluster.url.replace(cluster.password, "wrong"))


def test_any_listed_node_is_enough_to_reach_the_cluster(cluster):
    last = cluster.nodes[-1]
    conn = Connector.connect(f"valkey+cluster://:{cluster.password}@127.0.0.1:1,"
                             f"{last.host}:{last.port}")
    try:
        assert len(conn._primaries()) == 3
        q = "any-node"
        assert jobs.enqueue(conn, q, ids.mint(), b"x") == "enqueued"
        assert jobs.counts(conn, q)["pending"] == 1
    finally:
        conn.close()


def test_app_on_a_cluster_url_enqueues_to_each_queues_shard(cluster):
    app = App(cluster.url)
    try:
        queues = [f"app-{i}" for i in range(6)]
        for q in queues:
            app.task(lambda: None, queue=q, name=f"noop-{q}")
        made = {q: app.enqueue(f"noop-{q}") for q in queues}
        for q, jid in made.items():
            assert app.job(jid).state == "pending"
            owner = cluster.owner(keyspace.job_key(q, jid))
            assert cluster.client(owner).exists(keyspace.job_key(q, jid)) == 1
        assert len({cluster.owner(keyspace.queue_key(q, "pending")).port for q in queues}) > 1
        assert set(queues) <= set(discovery.queues(app.connector()))
    finally:
        app.close()


def test_discovery_scans_every_primary(cluster):
    conn = Connector.connect(cluster.url)
    try:
        queues = [f"disc-{i}" for i in range(9)]
        for q in queues:
            jobs.enqueue_in(conn, q, ids.mint(), b"x", 60_000)
        owners = {cluster.owner(keyspace.queue_key(q, "schedule")).port for q in queues}
        assert len(owners) == 3
        assert set(queues) <= set(discovery.queues(conn))

        async def via_async() -> list[str]:
            aconn = await AsyncConnector.connect(cluster.url)
            try:
                return await discovery.queues(aconn)
            finally:
                await aconn.close()

        assert set(queues) <= set(asyncio.run(via_async()))
    finally:
        conn.close()


@pytest.mark.slow
def test_cli_stats_over_echomq_url_reads_every_shard(cluster):
    conn = Connector.connect(cluster.url)
    queues = [f"cli-{i}" for i in range(6)]
    for i, q in enumerate(queues):
        jobs.enqueue_many(conn, q, [(ids.mint(), b"x") for _ in range(i + 1)])
    conn.close()
    env = {**os.environ, "ECHOMQ_URL": cluster.url}
    done = subprocess.run([sys.executable, "-m", "echomq.cli", "stats", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    import json

    table = json.loads(done.stdout)
    assert {q: table[q]["pending"] for q in queues} == {q: i + 1 for i, q in enumerate(queues)}


# -- echomq cluster up / down ------------------------------------------------------------


def echomq(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "echomq.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_cluster_up_prints_a_url_and_down_stops_the_nodes_by_pid(tmp_path):
    up = echomq("cluster", "up", "--masters", "3", "--replicas", "1", "--dir", str(tmp_path))
    assert up.returncode == 0, up.stderr
    url = up.stdout.strip().splitlines()[-1]
    assert url.startswith("valkey+cluster://:") and "Traceback" not in up.stderr
    import json

    state = json.loads((tmp_path / "cluster.json").read_text())
    assert (tmp_path / "cluster.json").stat().st_mode & 0o077 == 0  # it holds the password
    pids = [n["pid"] for n in state["nodes"]]
    assert len(pids) == 6 and all(os.path.exists(f"/proc/{p}") for p in pids)
    try:
        conn = Connector.connect(url)  # the nodes outlived the `up` process
        assert jobs.enqueue(conn, "up-down", ids.mint(), b"x") == "enqueued"
        conn.close()
        again = echomq("cluster", "up", "--dir", str(tmp_path))
        assert again.returncode == 1 and "already up" in again.stderr
        assert echomq("cluster", "status", "--dir", str(tmp_path)).stdout.strip() == url
    finally:
        down = echomq("cluster", "down", "--dir", str(tmp_path))
    assert down.returncode == 0 and "stopped 6 node(s)" in down.stdout
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    status = echomq("cluster", "status", "--dir", str(tmp_path))
    assert status.returncode == 1 and "no cluster" in status.stderr


def _alive(pid: int) -> bool:
    from echomq.embedded.cluster import node_alive

    return node_alive(pid)


@pytest.mark.slow
def test_wire_6_on_a_cluster_needs_the_module_on_every_node():
    with LocalCluster(masters=1, replicas=0, native=False) as bare:
        with pytest.raises(errors.NativeUnavailable, match="emq"):
            Connector.connect(bare.url, wire=6)

        async def via_async() -> None:
            await AsyncConnector.connect(bare.url, wire=6)

        with pytest.raises(errors.NativeUnavailable):
            asyncio.run(via_async())
        Connector.connect(bare.url, wire=4).close()  # scripts need nothing loaded


@pytest.mark.slow
def test_idle_consumers_block_on_each_queues_own_primary(cluster):
    """Each queue's consumer blocks on its wake list at the primary owning the queue's slot
    (one key per BLPOP: never a cross-slot blocking call), about once a beat when idle, and
    an enqueue wakes it at once."""
    from echomq.runtime.consumer import Consumer

    queues = [f"wake-{i}" for i in range(6)]
    owner = {q: cluster.owner(keyspace.queue_key(q, "wake")) for q in queues}
    assert len({n.port for n in owner.values()}) == 3
    started: dict[str, float] = {}

    def blpops() -> dict[int, int]:
        return {n.port: int(cluster.client(n).info("commandstats")
                            .get("cmdstat_blpop", {}).get("calls", 0))
                for n in cluster.primaries()}

    async def main() -> float:
        conn = await AsyncConnector.connect(cluster.url)

        async def handler(job) -> None:  # type: ignore[no-untyped-def]
            started[job.queue] = time.monotonic()

        stop = asyncio.Event()
        consumers = [Consumer(conn, q, handler, beat_ms=1000) for q in queues]
        tasks = [asyncio.ensure_future(c.run(stop)) for c in consumers]
        await asyncio.sleep(0.3)
        before = blpops()
        await asyncio.sleep(1.5)
        after = blpops()
        per_node = collections.Counter(owner[q].port for q in queues)
        for port, n in per_node.items():
            calls = after[port] - before[port]
            # n idle queues on that primary, one BLPOP a beat each (no polling)
            assert 1 <= calls <= 4 * n, (port, calls, n)
        t0 = time.monotonic()
        await jobs.enqueue(conn, queues[-1], ids.mint(), b"wake")
        deadline = time.monotonic() + 2
        while queues[-1] not in started and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        stop.set()
        await asyncio.gather(*tasks)
        await conn.close()
        return started[queues[-1]] - t0

    assert asyncio.run(main()) < 0.3


def _replica_of(cluster, primary):  # type: ignore[no-untyped-def]
    return next(n for n in cluster.nodes if n is not primary and n.running() and int(
        cluster.client(n).info("replication").get("master_port", -1)) == primary.port)


def test_app_wait_replicas_rides_the_writes_connection_on_a_cluster(cluster):
    """App(wait_replicas=1) on a cluster: the WAIT is routed to the written queue's primary
    (the write's own connection), so an enqueue returns once a replica has it; with that
    replica stalled it raises NotDurable instead of acknowledging a write it could lose."""
    import os
    import signal

    app = App(cluster.url, wait_replicas=1, wait_timeout_ms=200)
    try:
        queues = [f"durable-{i}" for i in range(6)]
        for q in queues:
            app.task(lambda: None, queue=q, name=f"d-{q}")
        for q in queues:  # every shard: the WAIT reaches each queue's own primary
            jid = app.enqueue(f"d-{q}")
            owner = cluster.owner(keyspace.queue_key(q, "pending"))
            replica = _replica_of(cluster, owner)
            import valkey

            reader = valkey.Valkey(host=replica.host, port=replica.port,
                                   password=cluster.password, single_connection_client=True)
            reader.execute_command("READONLY")  # a replica answers reads of its slots
            assert reader.exists(keyspace.job_key(q, jid)) == 1
            reader.close()
        q = queues[0]
        replica = _replica_of(cluster, cluster.owner(keyspace.queue_key(q, "pending")))
        os.kill(replica.pid, signal.SIGSTOP)
        try:
            with pytest.raises(errors.NotDurable) as caught:
                app.enqueue(f"d-{q}")
        finally:
            os.kill(replica.pid, signal.SIGCONT)
        assert caught.value.result == "enqueued"  # applied on the primary, not replicated
    finally:
        app.close()


@pytest.mark.slow
def test_echomq_dashboard_on_a_cluster_url_lists_every_shards_queues(cluster):
    import http.client
    import json

    from echomq.embedded.launch import free_port

    conn = Connector.connect(cluster.url)
    queues = [f"board-{i}" for i in range(6)]
    for q in queues:
        jobs.enqueue(conn, q, ids.mint(), b"x")
    registry.add(conn, queues)  # as an App's or the CLI's enqueue does
    conn.close()
    assert len({cluster.owner(keyspace.queue_key(q, "pending")).port for q in queues}) > 1
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "echomq.cli", "dashboard", "--url",
                             cluster.url, "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "dashboard" in banner, proc.stderr.read() if proc.poll() is not None else banner
        assert cluster.password not in banner  # the URL's secret stays out of the banner
        http_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        http_conn.request("GET", "/api/queues", headers={"Host": f"127.0.0.1:{port}"})
        reply = http_conn.getresponse()
        body = json.loads(reply.read())
        http_conn.close()
        assert reply.status == 200
        assert all(body[q]["pending"] == 1 for q in queues)
    finally:
        proc.terminate()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
