"""The embedded server: start, stop by pid, persistence, clear errors."""

from __future__ import annotations

import os
import socket

import pytest

from echomq import Connector, ids, jobs
from echomq.server import EmbeddedServer, ServerError


def test_persistent_server_replays_its_aof(tmp_path):
    srv = EmbeddedServer(data_dir=tmp_path, password="pw", native=False)
    srv.start()
    pid = srv.pid
    assert pid and srv.running()
    conn = Connector.connect(srv.url)
    jid = ids.mint()
    jobs.enqueue_in(conn, "q", jid, b"kept", 60_000)
    conn.close()
    srv.stop()
    assert not srv.running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert any(tmp_path.rglob("*.aof"))
    srv2 = EmbeddedServer(data_dir=tmp_path, password="pw", native=False, port=srv.port)
    with srv2:
        conn = Connector.connect(srv2.url)
        assert jobs.get(conn, "q", jid)["payload"] == b"kept"
        conn.close()


def test_password_is_generated_and_required():
    with EmbeddedServer(ephemeral=True, native=False) as srv:
        assert len(srv.password) >= 16
        import valkey

        with pytest.raises(valkey.exceptions.AuthenticationError):
            valkey.Valkey(host="127.0.0.1", port=srv.port).ping()


def test_port_taken_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} .* already in use"):
            EmbeddedServer(ephemeral=True, port=port).start()


def test_missing_binary_is_a_clear_error(tmp_path):
    with pytest.raises(ServerError, match="missing or not executable"):
        EmbeddedServer(ephemeral=True, binary=tmp_path / "nope").start()


def test_non_loopback_is_refused():
    with pytest.raises(Exception, match="loopback"):
        EmbeddedServer(host="0.0.0.0")


def test_bad_module_fails_start_with_log(tmp_path):
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not a module")
    with pytest.raises(ServerError, match="exited"):
        EmbeddedServer(ephemeral=True, native=False, loadmodules=[bogus]).start()
