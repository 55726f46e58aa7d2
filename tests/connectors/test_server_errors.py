"""Server error codes kept exactly, each provoked on a real server.

valkey-py strips the code of some replies (``-OOM ...`` became ``ERR command not
allowed ...``); the connectors put it back and map the common ones to typed errors, all
``errors.CommandError`` (so degraded-mode handling is unchanged) and the transient ones
``errors.Unavailable`` (a producer backs off on them: nothing was written).
"""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
import valkey

from echomq import AsyncConnector, Connector
from echomq.core import errors, ids, keyspace
from echomq.embedded.launch import free_port
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.app import App
from echomq.verbs import jobs
from tests.support.polling import wait_for


@pytest.fixture
def small() -> Iterator[EmbeddedServer]:
    srv = EmbeddedServer(ephemeral=True, extra_args=["--maxmemory-policy", "noeviction"])
    srv.start()
    yield srv
    srv.stop()


def _fill_memory(raw: valkey.Valkey) -> None:
    """Set maxmemory far under what is used, so every growing write is refused (a margin
    just under ``used_memory`` can vanish when a big query buffer is freed)."""
    raw.config_set("maxmemory", "1")


def test_oom_keeps_its_code_and_writes_nothing(small, snap_of):
    raw = valkey.Valkey.from_url(small.url)
    conn = Connector.connect(small.url)
    q = "oom"
    jid = ids.mint()
    assert jobs.enqueue(conn, q, jid, b"before") == "enqueued"
    _fill_memory(raw)
    before = snap_of(raw, q)
    with pytest.raises(errors.OutOfMemory) as exc:
        jobs.enqueue(conn, q, ids.mint(), b"x" * 1000)
    assert str(exc.value).startswith("OOM command not allowed when used memory > 'maxmemory'")
    assert exc.value.code == "OOM"
    assert isinstance(exc.value, errors.Unavailable)
    assert isinstance(exc.value, errors.CommandError)  # what degraded mode already catches
    with pytest.raises(errors.OutOfMemory):
        jobs.enqueue_in(conn, q, ids.mint(), b"x", 5_000)
    with pytest.raises(errors.OutOfMemory):
        jobs.enqueue_many(conn, q, [(ids.mint(), b"x") for _ in range(10)])

    async def aio() -> None:
        aconn = await AsyncConnector.connect(small.url)
        try:
            with pytest.raises(errors.OutOfMemory, match=r"^OOM command not allowed"):
                await jobs.enqueue(aconn, q, ids.mint(), b"x")
        finally:
            await aconn.close()

    asyncio.run(aio())
    with App(small.url) as app:
        @app.task(queue=q)
        def t() -> None: ...

        with pytest.raises(errors.OutOfMemory, match=r"^OOM "):
            t.enqueue()
    assert snap_of(raw, q) == before  # every refusal wrote nothing
    # a drain still works on a full server: claim and ack only shrink memory
    c = jobs.claim(conn, q, 30_000)
    assert c is not None and c.id == jid
    jobs.ack(conn, q, c.id, c.token, keep=False)
    raw.config_set("maxmemory", "0")
    assert jobs.enqueue(conn, q, ids.mint(), b"after") == "enqueued"
    conn.close()
    raw.close()


@pytest.fixture
def snap_of():
    from tests.support.clients import snapshot

    return snapshot


def test_readonly_replica(tmp_path: pathlib.Path):
    with EmbeddedServer(ephemeral=True) as primary:
        replica = EmbeddedServer(ephemeral=True, extra_args=[
            "--replicaof", "127.0.0.1", str(primary.port), "--masterauth", primary.password])
        with replica:
            conn = Connector.connect(replica.url)
            with pytest.raises(errors.ReadOnly) as exc:
                jobs.enqueue(conn, "q", ids.mint(), b"x")
            assert str(exc.value).startswith("READONLY You can't write against a read only")
            assert exc.value.code == "READONLY" and isinstance(exc.value, errors.Unavailable)
            conn.close()


def test_noscript_noperm_wrongtype_and_err(server, url, queue, raw):
    conn = Connector.connect(url)
    with pytest.raises(errors.NoScript, match=r"^NOSCRIPT No matching script"):
        conn.call("EVALSHA", "0" * 40, 0)
    raw.zadd(keyspace.job_key(queue, "JOBX"), {"a": 1})
    with pytest.raises(errors.CommandError, match=r"^WRONGTYPE Operation against a key"):
        conn.call("HSET", keyspace.job_key(queue, "JOBX"), "a", "b")
    with pytest.raises(errors.CommandError) as exc:
        conn.call("EMQ.NOSUCH", "x")
    assert exc.value.code == "ERR" and type(exc.value) is errors.CommandError
    user = "ro" + queue
    raw.acl_setuser(user, enabled=True, passwords=["+pw"], keys=["*"],
                    commands=["+ping", "+hgetall", "+module"])
    try:
        limited = Connector.connect(f"valkey://{user}:pw@127.0.0.1:{server.port}/0")
        with pytest.raises(errors.NoPermission) as perm:
            jobs.enqueue(limited, queue, ids.mint(), b"x")
        assert str(perm.value).startswith(f"NOPERM User {user} has no permissions to run")
        limited.close()
    finally:
        raw.acl_deluser(user)
    conn.close()


@pytest.mark.slow
def test_busy_server(url, queue):
    raw = valkey.Valkey.from_url(url)
    raw.config_set("busy-reply-threshold", "50")
    spin = ("local t = redis.call('TIME') while true do local n = redis.call('TIME') "
            "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 1200000 then break end end return 1")
    runner = threading.Thread(target=lambda: valkey.Valkey.from_url(url).eval(spin, 0))
    conn = Connector.connect(url)
    try:
        runner.start()
        time.sleep(0.3)
        with pytest.raises(errors.Busy) as exc:
            jobs.enqueue(conn, queue, ids.mint(), b"x")
        assert str(exc.value).startswith("BUSY ") and isinstance(exc.value, errors.Unavailable)
    finally:
        runner.join()
        raw.config_set("busy-reply-threshold", "5000")
        raw.close()
    assert jobs.enqueue(conn, queue, ids.mint(), b"x") == "enqueued"
    conn.close()


def test_misconf_when_the_server_cannot_persist(tmp_path: pathlib.Path):
    with EmbeddedServer(ephemeral=True, data_dir=tmp_path) as srv:
        raw = valkey.Valkey.from_url(srv.url)
        conn = Connector.connect(srv.url)
        (tmp_path / "dump.rdb").mkdir()  # the snapshot's final rename fails, even as root
        (tmp_path / "dump.rdb" / "keep").write_text("x")
        raw.config_set("save", "3600 1")
        raw.bgsave()
        wait_for(lambda: raw.info("persistence")["rdb_last_bgsave_status"] == "err", 10,
                 "the failing save to finish", every=0.05)
        with pytest.raises(errors.Misconf) as exc:
            jobs.enqueue(conn, "q", ids.mint(), b"x")
        assert str(exc.value).startswith("MISCONF ")
        assert isinstance(exc.value, errors.Unavailable)
        with pytest.raises(errors.Misconf):  # PING too: the server says it this way
            conn.ping()
        assert raw.dbsize() == 0
        conn.close()
        raw.config_set("save", "")  # else shutdown tries (and fails) to save
        raw.close()


def test_loading_server(tmp_path: pathlib.Path):
    """A server still loading its dataset answers LOADING: typed, not a wire error."""
    srv = EmbeddedServer(ephemeral=True, data_dir=tmp_path)
    srv.start()
    raw = valkey.Valkey.from_url(srv.url)
    pipe = raw.pipeline(transaction=False)
    for i in range(3_000):
        pipe.set(f"k{i}", "v")
    pipe.execute()
    raw.save()
    raw.close()
    srv.stop()
    # a per-key load delay (a server test knob) makes the load last ~1.5 s
    slow = EmbeddedServer(ephemeral=True, data_dir=tmp_path, password="", extra_args=[
        "--key-load-delay", "500", "--loading-process-events-interval-bytes", "1024"])
    slow.port = free_port()
    # started by hand: EmbeddedServer.start would wait out the load
    proc = subprocess.Popen(slow.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        seen = None
        deadline = time.monotonic() + 10
        while seen is None and time.monotonic() < deadline:
            try:
                Connector.connect(slow.url).close()
            except errors.Loading as exc:
                seen = exc
            except errors.WireError:
                time.sleep(0.01)  # not listening yet
            else:
                pytest.fail("the server finished loading before it was seen loading")
        assert seen is not None
        assert str(seen).startswith("LOADING ") and isinstance(seen, errors.Unavailable)
    finally:
        proc.kill()
        proc.wait()
