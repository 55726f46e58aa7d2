"""Least privilege, against the server's real ACL: ``echomq acl --role R --queues Q`` prints
the rules; a user made from them does its role's job (a producer admits and reads its jobs,
a worker process runs them, a dashboard shows them) and is refused everything else (other
queues, admin commands, and for the dashboard any write)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import valkey

from echomq import Connector, dashboard, errors, ids, keyspace, native
from echomq.core import acl
from echomq.tasks.app import App
from echomq.verbs import jobs, registry
from tests.support.board import Client
from tests.support.cli import echomq, popen
from tests.support.polling import wait_for

ADMIN = ("FLUSHALL", "FLUSHDB", "CONFIG GET maxmemory", "KEYS *", "ACL LIST",
         "BGSAVE", "INFO", "CLIENT LIST", "SCRIPT FLUSH", "FUNCTION FLUSH")


@pytest.fixture
def make_user(server, raw) -> Iterator[Callable[..., str]]:
    """``make_user(role, queues, wire=4)``: a user made from ``echomq acl``'s output; its
    URL. Deleted after the test."""
    made: list[str] = []

    def make(role: str, queues: list[str], wire: int = 4) -> str:
        user = f"{role}-{uuid.uuid4().hex[:8]}"
        done = echomq("acl", "--role", role, "--queues", ",".join(queues), "--user", user,
                      "--password", "pw", "--json", "--wire", str(wire))
        assert done.returncode == 0, done.stderr
        args = json.loads(done.stdout)["args"]
        assert raw.execute_command(*args) in (b"OK", "OK", True)
        made.append(user)
        return f"valkey://{user}:pw@127.0.0.1:{server.port}/0"

    yield make
    for user in made:
        raw.acl_deluser(user)


def refused_everything_else(url: str, other_queue: str) -> None:
    plain = valkey.Valkey.from_url(url)
    try:
        for command in ADMIN:
            with pytest.raises(valkey.exceptions.NoPermissionError):
                plain.execute_command(*command.split())
        with pytest.raises(valkey.exceptions.NoPermissionError):
            plain.get("somebody-else's-key")
        with pytest.raises(valkey.exceptions.NoPermissionError):
            plain.hgetall(keyspace.job_key(other_queue, ids.mint()))
        with pytest.raises(valkey.exceptions.NoPermissionError):
            plain.execute_command("SUBSCRIBE", "anything")
    finally:
        plain.close()
    conn = Connector.connect(url)
    try:
        with pytest.raises(errors.NoPermission):
            jobs.enqueue(conn, other_queue, ids.mint(), b"x")
    finally:
        conn.close()


def test_the_printed_line_is_one_acl_setuser():
    done = echomq("acl", "--role", "dashboard", "--queues", "mail,a b", "--user", "board",
                  "--password", "s3cret")
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("ACL SETUSER board reset on >s3cret resetkeys resetchannels -@all ")
    assert "%R~emq:{mail}:*" in line and '"%R~emq:{a b}:*"' in line and "+@write" not in line
    made_up = echomq("acl", "--role", "worker", "--queues", "q")
    assert "password for echomq-worker: " in made_up.stderr
    bad = echomq("acl", "--role", "admin", "--queues", "q")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    bad = echomq("acl", "--role", "worker", "--queues", "a{b}")
    assert bad.returncode == 2 and "hash tag" in bad.stderr


def test_a_producer_admits_and_reads_its_queue_only(make_user, raw, queue):
    url = make_user("producer", [queue])
    app = App(url)

    @app.task(queue=queue)
    def send(to: str) -> str:
        return to

    try:
        jid = send.enqueue("a@b.c")
        send.enqueue_in(60_000, "later")
        send.enqueue_many([("x",), ("y",)])
        assert app.job(jid).state == "pending"
        with pytest.raises(TimeoutError):
            app.result(jid, timeout=0.2)  # waiting on a result is a producer's (BLMOVE)
        assert app.cancel(jid) == "cancelled"
        assert app.signal(f"acl:{queue}", {"ok": 1}) == 0  # a producer sends signals
    finally:
        app.close()
    assert raw.sismember(keyspace.registry_key(), queue)
    refused_everything_else(url, "other" + queue)
    plain = valkey.Valkey.from_url(url)
    try:  # no blocking pop: claiming in a loop is a worker's
        with pytest.raises(valkey.exceptions.NoPermissionError):
            plain.blpop([keyspace.queue_key(queue, "wake")], 0.1)
    finally:
        plain.close()


@pytest.mark.skipif(not native.available(), reason="the native module is not built")
def test_a_producer_at_wire_6_sends_the_native_admission(make_user, queue):
    app = App(make_user("producer", [queue], wire=6), wire=6)

    @app.task(queue=queue)
    def send(to: str) -> str:
        return to

    try:
        assert app.job(send.enqueue_in(60_000, "x")).state == "scheduled"
        assert app.job(send.enqueue("y")).state == "pending"
    finally:
        app.close()


@pytest.mark.slow
def test_a_worker_runs_its_queue_and_nothing_else(make_user, tmp_path, conn, raw, queue):
    producer = make_user("producer", [queue])
    worker = make_user("worker", [queue])
    (tmp_path / "acl_app.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.task(queue='{queue}', max_attempts=2, backoff=('fixed', 10))\n"
        "def work(n):\n    if n == 3:\n        raise ValueError('three')\n    return n\n"
        f"@app.every(3_600_000, name='tick')\n@app.task(queue='{queue}')\ndef tick():\n"
        "    pass\n"
        "from echomq import current_job\n"
        f"@app.task(queue='{queue}')\ndef wait(key):\n"
        "    return current_job().wait_for(key)\n")
    app = App(producer)
    send = app.task(name="acl_app.work", queue=queue)(lambda n: n)
    wait = app.task(name="acl_app.wait", queue=queue)(lambda key: key)
    try:
        for n in range(10):
            send.enqueue(n)
        send.enqueue_in(300, 11)  # promoted by the worker's beat
        wait.enqueue(f"acl:{queue}")  # a durable wait: the worker registers on the signal
        app.signal(f"acl:{queue}", "go")  # kept for the wait, whichever comes first
    finally:
        app.close()
    proc = popen("worker", "acl_app:app", url=worker, cwd=tmp_path)
    try:
        wait_for(lambda: jobs.stats(conn, queue)["completed"] >= 12
                 and jobs.stats(conn, queue)["dead"] == 1, 30, "the worker ran every job")
    finally:
        proc.terminate()
        err = proc.communicate(timeout=15)[1].decode()
    assert "NOPERM" not in err and "no permissions" not in err, err
    refused_everything_else(worker, "other" + queue)


def test_a_dashboard_user_reads_and_cannot_write(make_user, conn, raw, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    dead = ids.mint()
    jobs.enqueue(conn, queue, dead, b"y")
    c = jobs.claim(conn, queue, 60_000)
    jobs.retry(conn, queue, c.id, c.token, 0, 1, "boom")
    registry.add(conn, [queue])
    url = make_user("dashboard", [queue])
    board_conn = Connector.connect(url)
    httpd = dashboard.serve(board_conn, port=0, queues=[queue])  # not read-only: the ACL is
    client = Client(httpd.server_address[1])
    try:
        for path in ("/", f"/q/{queue}", f"/q/{queue}?state=dead", f"/q/{queue}/job/{dead}",
                     f"/q/{queue}/clock", "/metrics", f"/api/q/{queue}", "/api/queues"):
            code, page = client.get(path)
            assert code == 200, (path, page[:300])
        before = raw.hgetall(keyspace.job_key(queue, dead))
        status = client.post(f"/q/{queue}/job/{dead}/retry")
        assert status >= 400 or raw.hgetall(keyspace.job_key(queue, dead)) == before
        assert raw.hgetall(keyspace.job_key(queue, dead)) == before
        with pytest.raises(errors.NoPermission):
            jobs.enqueue(board_conn, queue, ids.mint(), b"x")
        with pytest.raises(errors.NoPermission):
            board_conn.call("HSET", keyspace.job_key(queue, jid), "state", "dead")
        with pytest.raises(errors.NoPermission):
            board_conn.call("SADD", keyspace.registry_key(), "mine")
    finally:
        httpd.shutdown()
        httpd.server_close()
        board_conn.close()
    refused_everything_else(url, "other" + queue)


def test_the_rules_name_only_what_the_roles_need() -> None:
    rules: dict[str, Any] = {r: acl.rules(r, ["q"]) for r in acl.ROLES}
    assert "+@write" not in rules["dashboard"] and "+evalsha" not in rules["dashboard"]
    assert "+blpop" in rules["worker"] and "+blpop" not in rules["producer"]
    for r in acl.ROLES:
        assert rules[r][:3] == ["resetkeys", "resetchannels", "-@all"]
        assert "-@dangerous" in rules[r]
    assert "+emq.promote" in acl.rules("worker", ["q"], wire=6)
    # the signals' rendezvous (durable waits): producers and workers, not the dashboard
    assert "~emq:{sig:*}:*" in rules["producer"] and "~emq:{sig:*}:*" in rules["worker"]
    assert not any("sig:" in r for r in rules["dashboard"])
    assert not any(x.startswith("+emq.") for x in rules["worker"])


def test_a_wire_6_worker_user_runs_the_native_hot_path(make_user, conn, raw, queue):
    """The worker role at wire 6 names the hot path's commands: its claims and acks are the
    module's, and the App it connects with picks wire 6 (MODULE LIST allowed)."""
    url = make_user("worker", [queue], wire=6)
    jobs.enqueue_many(conn, queue, [(ids.mint(), b"x") for _ in range(3)])
    before = raw.info("commandstats")
    with App(url) as app:
        assert app.wire == 6
        c6 = app.connector()
        got = jobs.claim_many(c6, queue, 60_000, 3)
        assert len(got) == 3
        assert jobs.ack_many(c6, queue, [(c.id, c.token) for c in got[1:]]) == [None, None]
        jobs.ack(c6, queue, got[0].id, got[0].token)
    after = raw.info("commandstats")
    for name in ("emq.claim", "emq.ackmany", "emq.ack"):
        key = f"cmdstat_{name}"
        assert after[key]["calls"] == before.get(key, {"calls": 0})["calls"] + 1, name
        assert after[key]["failed_calls"] == before.get(key, {"failed_calls": 0})["failed_calls"]
