"""The embedded server: start, stop by pid, persistence, clear errors."""

from __future__ import annotations

import os
import socket

import pytest

from echomq import Connector
from echomq.core import ids
from echomq.embedded.launch import ServerError
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs


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


# -- files and secrets ------------------------------------------------------------------------


def _modes(root):
    """Every path under ``root`` with its permission bits (``root`` itself included)."""
    import stat

    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode)
            for p in [root, *root.rglob("*")]}


@pytest.fixture
def open_umask():
    old = os.umask(0)  # the worst a user can have: every file world-writable by default
    yield
    os.umask(old)


def test_data_dir_is_0700_and_every_file_0600_whatever_the_umask(tmp_path, open_umask):
    from echomq.embedded import datadir
    data = tmp_path / "data"
    try:
        found = EmbeddedServer.find_or_start(data, native=False)
        conn = Connector.connect(found.url)
        jobs.enqueue(conn, "q", ids.mint(), b"secret payload")
        conn.close()
        modes = _modes(data)
        names = set(modes)
        assert {".", "echomq-server.json", "echomq-server.lock", "valkey.log",
                "appendonlydir"} <= names
        assert any(n.endswith(".aof") for n in names)
        for name, mode in modes.items():
            want = 0o700 if (data / name).is_dir() else 0o600
            assert mode == want, f"{name} is {mode:04o}, want {want:04o}"
    finally:
        EmbeddedServer.stop_recorded(data)
    # the record keeps its mode across a stop (rewritten, not recreated loosely)
    assert _modes(data)["echomq-server.json"] == 0o600
    assert datadir.read(data) is not None


def test_an_old_loose_data_dir_is_tightened(tmp_path, open_umask):
    data = tmp_path / "old"
    (data / "appendonlydir").mkdir(parents=True, mode=0o755)
    data.chmod(0o755)
    (data / "appendonlydir").chmod(0o755)
    (data / "valkey.log").write_text("old log\n")
    (data / "valkey.log").chmod(0o644)
    with EmbeddedServer(data_dir=data, native=False):
        pass
    modes = _modes(data)
    assert modes["."] == 0o700 and modes["appendonlydir"] == 0o700
    assert modes["valkey.log"] == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_data_dir_other_users_can_write_is_refused(tmp_path, mode, monkeypatch):
    from echomq import App
    from echomq.core.errors import ConfigError

    data = tmp_path / "shared"
    data.mkdir()
    data.chmod(mode)
    with pytest.raises(ConfigError, match=r"writable by other users .*chmod 700"):
        EmbeddedServer(data_dir=data, native=False).start()
    with pytest.raises(ConfigError, match="writable by other users"):
        EmbeddedServer.find_or_start(data)
    monkeypatch.delenv("ECHOMQ_URL", raising=False)
    with pytest.raises(ConfigError, match="writable by other users"):
        App(data_dir=data).url  # noqa: B018
    assert list(data.iterdir()) == []  # refused before writing anything
    assert (data.stat().st_mode & 0o7777) == mode  # and left as it was


def test_the_cli_refuses_it_in_one_line(tmp_path):
    import subprocess
    import sys

    data = tmp_path / "shared"
    data.mkdir()
    data.chmod(0o777)
    done = subprocess.run([sys.executable, "-m", "echomq.cli", "server", "start",
                           "--data-dir", str(data)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"echomq server: data dir {data} is writable by other users")
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


def test_the_password_is_not_on_the_command_line():
    srv = EmbeddedServer(ephemeral=True, native=False, password="hunter2-not-in-ps")
    assert not any("hunter2" in a for a in srv.argv())
    with srv:
        conn = Connector.connect(srv.url)  # the password fed on stdin is the one required
        conn.close()
        import valkey

        with pytest.raises(valkey.exceptions.AuthenticationError):
            valkey.Valkey(host="127.0.0.1", port=srv.port, password="wrong").ping()


def test_a_password_with_quotes_and_spaces_is_kept_exactly():
    tricky = 'a "b" c\\d \'e\' é'
    with EmbeddedServer(ephemeral=True, native=False, password=tricky) as srv:
        import valkey

        assert valkey.Valkey(host="127.0.0.1", port=srv.port, password=tricky).ping()


@pytest.mark.slow
def test_the_password_is_never_printed(tmp_path):
    import subprocess
    import sys

    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
    env["ECHOMQ_DATA"] = str(data)
    script = ("import logging; logging.basicConfig(level=logging.DEBUG)\n"
              "from echomq import App; App().url\n")

    def run(*argv):
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)

    try:
        started = run(sys.executable, "-c", script)
        assert started.returncode == 0, started.stderr
        assert "started the embedded server" in started.stderr  # the log line is there...
        from echomq.embedded import datadir
        secret = datadir.read(data).password
        assert secret not in started.stderr + started.stdout  # ...without the password
        env["ECHOMQ_URL"] = datadir.read(data).url
        outputs = {"script": started.stdout + started.stderr}
        for argv in (["--help"], ["server", "--help"], ["server", "status"],
                     ["worker", "--help"], ["dashboard", "--help"], ["server", "stop"]):
            done = run(sys.executable, "-m", "echomq.cli", *argv)
            outputs[" ".join(argv)] = done.stdout + done.stderr
        assert "pid" in outputs["server status"]  # status did print, and stop did stop
        assert "stopped" in outputs["server stop"]
        for what, text in outputs.items():
            assert secret not in text, what
    finally:
        EmbeddedServer.stop_recorded(data)


def test_a_detached_start_that_fails_says_why_at_once(tmp_path):
    import time

    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not a module")
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="exited"):
        EmbeddedServer(data_dir=tmp_path / "d", native=False,
                       loadmodules=[bogus]).start(timeout=30, detach=True)
    assert time.monotonic() - t0 < 10  # seen from its pidfile, not waited out


def test_a_record_written_by_the_previous_version_is_understood(tmp_path):
    import json

    with EmbeddedServer(data_dir=tmp_path, native=False) as srv:
        (tmp_path / "echomq-server.json").write_text(json.dumps({"url": srv.url,
                                                                 "pid": srv.pid}))
        found = EmbeddedServer.find(tmp_path)
        assert found is not None and found.pid == srv.pid and found.url == srv.url
        assert EmbeddedServer.find_or_start(tmp_path).pid == srv.pid
