"""What a new user meets first: a web app's first burst of ``aenqueue`` on a fresh App,
``echomq job`` of a finished job whose result is kept, and a worker spec that names no
attribute. Real Valkey; the CLI as a subprocess."""

from __future__ import annotations

import asyncio

import pytest
import valkey

from echomq import App
from echomq.core import keyspace
from tests.support.cli import echomq


def _connections(raw: valkey.Valkey) -> int:
    return int(raw.info("stats")["total_connections_received"])


def _sadds(raw: valkey.Valkey) -> int:
    return int(raw.info("commandstats").get("cmdstat_sadd", {}).get("calls", 0))


def test_a_first_burst_of_aenqueue_opens_one_connector_and_registers_once(server, queue):
    """200 request handlers awaiting their first ``aenqueue`` at once on a fresh App: one
    AsyncConnector (not one per caller, the rest leaked) and one registry ``SADD``."""
    raw = valkey.Valkey.from_url(server.url)
    app = App(server.url)

    @app.task(queue=queue)
    def noop(i: int) -> None: ...

    async def main() -> list[str]:
        try:
            return list(await asyncio.gather(*(noop.aenqueue(i) for i in range(200))))
        finally:
            await app.aclose()

    conns, sadds = _connections(raw), _sadds(raw)
    got = asyncio.run(main())
    opened, registered = _connections(raw) - conns, _sadds(raw) - sadds
    app.close()
    assert len(set(got)) == 200
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 200
    assert raw.sismember(keyspace.registry_key(), queue)
    assert registered == 1
    # one connector's connections (the auto-pipelined one and the pool's), not 200
    assert opened <= 4, opened


def test_job_finds_a_completed_job_by_its_kept_result(server, queue, tmp_path):
    """An ack deletes the row and keeps the result: ``echomq job ID`` without ``--queue``
    still finds it (as ``app.job`` does), and the tree line shows its state."""
    from echomq import Connector
    from echomq.core import ids
    from echomq.verbs import jobs, registry
    conn = Connector.connect(server.url)
    try:
        registry.note(conn, queue)
        job_id = ids.mint()
        jobs.enqueue(conn, queue, job_id, b'{"args": [], "kwargs": {}, "task": "t.f"}')
        claim = jobs.claim(conn, queue, 30_000)
        assert claim is not None and claim.id == job_id
        jobs.ack(conn, queue, job_id, claim.token, False, result='{"n": 42}', keep_result_ms=60_000)
    finally:
        conn.close()
    done = echomq("job", job_id, url=server.url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "state     completed" in done.stdout
    assert 'result    {"n": 42}' in done.stdout
    assert "Traceback" not in done.stderr


def test_worker_spec_naming_a_missing_attribute_says_so(server, tmp_path):
    (tmp_path / "mytasks.py").write_text("from echomq import App\nworkers = App()\n")
    done = echomq("worker", "mytasks:nope", url=server.url, cwd=tmp_path)
    assert done.returncode == 1
    assert "module 'mytasks' has no attribute 'nope'" in done.stderr
    assert "mytasks:workers" in done.stderr  # the App it does have
    assert "Traceback" not in done.stderr


def test_job_shows_a_completed_flow_root_by_its_kept_result(server, queue, tmp_path):
    """A flow parent that completed with a kept result (its row deleted): ``echomq job``
    finds it and its tree's first line says ``completed``, not ``-``."""
    from echomq import Connector
    from echomq.core import ids
    from echomq.verbs import flows, jobs, registry
    kids = queue + "k"
    conn = Connector.connect(server.url)
    try:
        registry.note(conn, queue)
        leaf = flows.Node(kids, ids.mint(), b"{}")
        root = flows.Node(queue, ids.mint(), b"{}", children=(leaf,))
        flows.admit(conn, root)
        child = jobs.claim(conn, kids, 30_000)
        assert child is not None and child.id == leaf.id
        jobs.ack(conn, kids, leaf.id, child.token, False, result="1", keep_result_ms=60_000)
        flows.carry(conn, kids)
        parent = jobs.claim(conn, queue, 30_000)
        assert parent is not None and parent.id == root.id
        jobs.ack(conn, queue, root.id, parent.token, False, result="7", keep_result_ms=60_000)
    finally:
        conn.close()
    done = echomq("job", root.id, url=server.url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "task      -" in lines
    assert f"  {root.id}  {queue}  completed" in lines
    assert any(line.endswith(f"{leaf.id}  {kids}  completed") for line in lines)


@pytest.mark.slow
def test_bad_cli_arguments_exit_2_without_a_python_error(server, tmp_path):
    """A port out of range and a priority out of range are bad arguments: exit 2, one line
    naming the problem, no Python exception name."""
    for args in (("dashboard", "--port", "99999"), ("server", "--ephemeral", "--port", "70000"),
                 ("enqueue", "t.f", "--priority", "-1")):
        done = echomq(*args, url=server.url, cwd=tmp_path, env={"ECHOMQ_DATA": str(tmp_path)})
        assert done.returncode == 2, (args, done.stderr)
        assert "Error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert ("port" if "--port" in args else "priority") in done.stderr


def test_cli_cancel_of_a_flow_root_cancels_its_waiting_subtree(server, queue, tmp_path):
    """``echomq cancel ROOT`` does what ``app.cancel(root)`` does: the waiting parent and
    its waiting children, not the parent alone (its children left to run for nobody)."""
    from echomq import Connector
    from echomq.core import ids
    from echomq.verbs import flows, registry
    kids = queue + "k"
    conn = Connector.connect(server.url)
    try:
        registry.note(conn, queue)
        leaves = tuple(flows.Node(kids, ids.mint(), b"{}", mode="in", value=60_000)
                       for _ in range(2))
        root = flows.Node(queue, ids.mint(), b"{}", children=leaves)
        flows.admit(conn, root)
        done = echomq("cancel", root.id, url=server.url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{root.id} cancelled {queue}\n"
        raw = valkey.Valkey.from_url(server.url)
        states = [raw.hget(keyspace.job_key(kids, leaf.id), "state") for leaf in leaves]
        assert states == [b"cancelled", b"cancelled"]
        assert raw.zcard(keyspace.queue_key(kids, "schedule")) == 0
    finally:
        conn.close()


@pytest.mark.slow
def test_stats_shows_flow_parents_waiting_for_their_children(server, queue, tmp_path):
    """A parent waiting for its children sits on no column of ``echomq stats``: a line
    under the table (and a key in ``--json``) says it is there; a queue without one
    shows neither."""
    import json

    from echomq import Connector
    from echomq.core import ids
    from echomq.verbs import flows, registry
    kids = queue + "k"
    conn = Connector.connect(server.url)
    try:
        registry.note(conn, queue)
        leaf = flows.Node(kids, ids.mint(), b"{}", mode="in", value=60_000)
        flows.admit(conn, flows.Node(queue, ids.mint(), b"{}", children=(leaf,)))
    finally:
        conn.close()
    done = echomq("stats", "--queue", queue, "--queue", kids, url=server.url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{queue}: 1 flow parents waiting for their children" in done.stdout
    assert f"{kids}:" not in done.stdout
    got = echomq("stats", "--queue", queue, "--queue", kids, "--json", url=server.url,
                 cwd=tmp_path)
    table = json.loads(got.stdout)
    assert table[queue]["waiting-children"] == 1 and "waiting-children" not in table[kids]
    assert table[kids]["scheduled"] == 1
