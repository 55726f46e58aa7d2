"""The implicit embedded server across real processes.

A short script that enqueues and exits leaves the server running (detached, found through
the data dir's record); a worker started later runs the job; concurrent starters share one
server; a dashboard and a worker restarted in any order (and across `echomq server stop`)
keep working; `echomq server status|stop|url` as subprocesses; durability on the way.
Every process here is real: scripts, `echomq` commands, Valkey.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import valkey

from echomq import App
from echomq.core.errors import ConfigError
from echomq.embedded import datadir
from echomq.embedded.launch import ServerError, free_port
from echomq.embedded.server import EmbeddedServer
from tests.support.polling import wait_for

TASKS = '''
import os
from echomq import App

app = App()

@app.task(queue="mail", name="note")
def note(text):
    with open(os.environ["T_OUT"], "a") as f:
        f.write(text + "\\n")

@app.task(queue="idle", name="never")
def never():
    pass
'''

ENQUEUE = '''
import sys
import tasks
print(tasks.note.enqueue(sys.argv[1]))
print(tasks.app.server_record.pid)
'''


class Env:
    """A project dir (tasks.py) and a data dir; spawns scripts and `echomq` commands."""

    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.data = tmp_path / "data"
        self.out = tmp_path / "out.txt"
        (tmp_path / "tasks.py").write_text(TASKS)
        (tmp_path / "enqueue.py").write_text(ENQUEUE)
        self.env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
        self.env.update(ECHOMQ_DATA=str(self.data), T_OUT=str(self.out))
        self.procs: list[subprocess.Popen[str]] = []

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def echomq(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-m", "echomq.cli", *args)

    def enqueue(self, text: str) -> tuple[str, int]:
        done = self.run(sys.executable, "enqueue.py", text)
        assert done.returncode == 0, done.stderr
        job_id, pid = done.stdout.split()
        return job_id, int(pid)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "echomq.cli", *args], cwd=self.cwd,
                                env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(proc)
        return proc

    def worker(self) -> subprocess.Popen[str]:
        return self.spawn("worker", "tasks:app", "--beat-ms", "50")

    def dashboard(self, port: int) -> subprocess.Popen[str]:
        proc = self.spawn("dashboard", "--port", str(port))
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "dashboard on" in line, line + _rest(proc)
        return proc

    def ran(self) -> list[str]:
        return self.out.read_text().split() if self.out.exists() else []

    def wait_ran(self, text: str, timeout: float = 20) -> None:
        wait_for(lambda: text in self.ran(), timeout, f"{text!r} to run", every=0.05,
                 detail=lambda: f"{text!r} never ran; ran {self.ran()}")

    def record(self) -> datadir.Record:
        found = datadir.read(self.data)
        assert found is not None
        return found

    def close(self) -> None:
        for proc in self.procs:
            stop(proc)
        EmbeddedServer.stop_recorded(self.data)  # detached by design: tests end it


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> str:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return _rest(proc)


def _rest(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None or proc.stdout is None:
        return ""
    return proc.stdout.read()


def get(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
        return int(resp.status)


def alive(pid: int) -> bool:
    return datadir.pid_alive(pid)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


@pytest.mark.slow
def test_a_job_enqueued_by_an_exited_script_runs_when_a_worker_starts_later(env):
    job_id, pid = env.enqueue("first")
    # the script is gone; the server it started is not: it leads its own session
    assert alive(pid)
    assert os.getsid(pid) == pid
    assert env.record().pid == pid
    status = env.echomq("server", "status")
    assert status.returncode == 0, status.stderr
    assert f"pid {pid}" in status.stdout
    # a second script finds it instead of starting another
    second, pid2 = env.enqueue("second")
    assert pid2 == pid
    assert env.ran() == []
    worker = env.worker()
    env.wait_ran("first")
    env.wait_ran("second")
    out = stop(worker)
    assert worker.returncode == 0, out
    assert job_id != second


@pytest.mark.slow
def test_concurrent_starters_share_one_server(env):
    procs = [subprocess.Popen([sys.executable, "enqueue.py", f"n{i}"], cwd=env.cwd,
                              env=env.env, stdout=subprocess.PIPE, text=True)
             for i in range(4)]
    pids = set()
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        pids.add(int(out.split()[1]))
    assert len(pids) == 1 and alive(pids.pop())
    client = valkey.Valkey.from_url(env.record().url)
    assert client.zcard("emq:{mail}:pending") == 4
    client.close()


@pytest.mark.slow
def test_dashboard_and_worker_restarted_in_any_order_keep_working(env):
    port = free_port()
    env.enqueue("a")
    board = env.dashboard(port)
    worker = env.worker()
    env.wait_ran("a")
    # the worker restarts under a running dashboard
    stop(worker)
    assert get(port) == 200
    worker = env.worker()
    env.enqueue("b")
    env.wait_ran("b")
    # the dashboard restarts under a running worker
    stop(board)
    board = env.dashboard(port)
    assert get(port) == 200
    env.enqueue("c")
    env.wait_ran("c")
    # the server itself is stopped, then a worker start brings it back: same port and
    # password, so the dashboard that was running all along answers again
    stop(worker)
    before = env.record()
    stopped = env.echomq("server", "stop")
    assert stopped.returncode == 0 and f"pid {before.pid}" in stopped.stdout
    assert not alive(before.pid or 0)
    worker = env.worker()
    env.enqueue("d")
    env.wait_ran("d")
    after = env.record()
    assert after.pid != before.pid and after.port == before.port
    assert get(port) == 200
    # and a worker that keeps running across a server stop and start carries on
    assert env.echomq("server", "stop").returncode == 0
    assert env.echomq("server", "start").returncode == 0
    env.enqueue("e")
    env.wait_ran("e")
    assert get(port) == 200
    stop(board)
    assert stop(worker) is not None and worker.returncode == 0


@pytest.mark.slow
def test_status_stop_and_url_as_commands(env):
    status = env.echomq("server", "status")
    assert status.returncode == 3 and "not running" in status.stdout
    started = env.echomq("server", "start", "--fsync", "always")
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("started\n")
    again = env.echomq("server", "start")
    assert again.returncode == 0 and again.stdout.startswith("already running\n")
    rec = env.record()
    as_json = env.echomq("server", "status", "--json")
    body = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and body["running"] is True and body["pid"] == rec.pid
    assert body["appendfsync"] == "always" and body["uptime_s"] >= 0
    assert body["url"] == f"valkey://127.0.0.1:{rec.port}/0"
    assert rec.password not in as_json.stdout
    assert rec.pid is not None and alive(rec.pid)
    status = env.echomq("server", "status")
    assert status.returncode == 0, status.stderr
    out = status.stdout
    assert f"pid {rec.pid}" in out and str(env.data) in out
    assert f"valkey://127.0.0.1:{rec.port}/0" in out
    assert "uptime" in out and "durability  always" in out
    assert rec.password not in out + status.stderr
    url = env.echomq("server", "url")
    assert url.returncode == 0 and url.stdout.strip() == rec.url
    # a job written now is there after a stop and a start (the AOF)
    client = valkey.Valkey.from_url(rec.url)
    client.set("kept", "1")
    client.close()
    stopped = env.echomq("server", "stop")
    assert stopped.returncode == 0
    assert f"stopped the embedded server pid {rec.pid}" in stopped.stdout
    assert datadir.wait_gone(rec.pid, 1)
    again = env.echomq("server", "stop")
    assert again.returncode == 0 and "not running" in again.stdout
    assert env.echomq("server", "status").returncode == 3
    assert json.loads(env.echomq("server", "status", "--json").stdout)["running"] is False
    assert env.echomq("server", "url").returncode == 3
    env.echomq("server", "start")
    client = valkey.Valkey.from_url(env.record().url)
    assert client.get("kept") == b"1"
    client.close()


@pytest.mark.slow
def test_a_crashed_server_is_replaced_on_the_same_port(env):
    _, pid = env.enqueue("x")
    port = env.record().port
    os.kill(pid, signal.SIGKILL)
    assert datadir.wait_gone(pid, 5)
    assert env.echomq("server", "status").returncode == 3
    _, pid2 = env.enqueue("y")
    assert pid2 != pid and env.record().port == port
    client = valkey.Valkey.from_url(env.record().url)
    # "x" was acknowledged before the kill: the AOF (written before the reply) kept it
    assert client.zcard("emq:{mail}:pending") == 2
    client.close()


def test_a_live_pid_that_is_not_the_server_is_not_taken_for_it(env):
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    port = free_port()
    # a record left by a server whose pid now belongs to another process
    record = datadir.Record(
        url=f"valkey://:pw@127.0.0.1:{port}/0", pid=decoy.pid, host="127.0.0.1", port=port,
        unix_socket=None, password="pw", durability="everysec", started_at=time.time(),
        data_dir=str(env.data))
    try:
        datadir.secure(env.data)
        datadir.write(env.data, record)
        assert EmbeddedServer.find(env.data) is None
        assert env.echomq("server", "stop").stdout.startswith("not running")
        assert decoy.poll() is None  # stop never signals a pid it could not confirm
        datadir.write(env.data, record)
        _, pid = env.enqueue("after-decoy")
        assert pid != decoy.pid and decoy.poll() is None
        assert env.record().password == "pw"  # the recorded password is kept
    finally:
        decoy.kill()
        decoy.wait()


@pytest.mark.slow
def test_a_server_that_runs_but_does_not_answer_is_never_doubled(env):
    _, pid = env.enqueue("x")
    os.kill(pid, signal.SIGSTOP)  # busy: a long script, a huge AOF to load
    try:
        with pytest.raises(ServerError, match=f"pid {pid} .* runs but does not answer"):
            EmbeddedServer.find_or_start(env.data, timeout=1.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert EmbeddedServer.find_or_start(env.data).pid == pid


@pytest.mark.slow
def test_foreground_server_is_found_and_refuses_a_second(env):
    fg = env.spawn("server")
    assert fg.stdout is not None
    lines = [fg.stdout.readline() for _ in range(4)]
    assert lines[0].startswith("echomq server pid"), lines
    rec = env.record()
    assert rec.password not in "".join(lines)
    _, pid = env.enqueue("via-foreground")
    assert pid == rec.pid
    second = env.echomq("server")
    assert second.returncode == 1 and "already running" in second.stderr
    assert rec.password not in second.stderr
    stopped = env.echomq("server", "stop")
    assert stopped.returncode == 0
    fg.wait(20)
    assert fg.returncode == 0 and "stopped by `echomq server stop`" in _rest(fg)


def test_durability_always_on_the_app_and_the_server(tmp_path):
    with pytest.raises(ValueError, match="durability"):
        App(durability="sometimes")
    with pytest.raises(ConfigError, match="ephemeral"):
        App(ephemeral=True, durability="always")
    with pytest.raises(ConfigError, match="ephemeral"):
        EmbeddedServer(ephemeral=True, durability="always")
    with pytest.raises(ConfigError, match="embedded server"):
        App("valkey://127.0.0.1:1/0", durability="always")
    data = tmp_path / "d"
    try:
        plain = App(data_dir=data)
        client = valkey.Valkey.from_url(plain.url)
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        # asking for more on a running server raises it (never lowers it)
        strict = App(data_dir=data, durability="always")
        assert strict.url == plain.url
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        assert json.loads((data / "echomq-server.json").read_text())["durability"] == "always"
        App(data_dir=data, durability="everysec").url  # noqa: B018
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        client.close()
    finally:
        EmbeddedServer.stop_recorded(data)
    with EmbeddedServer(data_dir=tmp_path / "e", durability="always", native=False) as srv:
        client = valkey.Valkey.from_url(srv.url)
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        client.close()


def test_ephemeral_app_keeps_its_server_to_itself(tmp_path, monkeypatch):
    monkeypatch.delenv("ECHOMQ_URL", raising=False)
    app = App(ephemeral=True, data_dir=tmp_path)
    url = app.url
    srv = app.server
    assert srv is not None and srv.running() and app.server_record is None
    assert not (tmp_path / "echomq-server.json").exists()
    pid = srv.pid
    app.close()
    assert not datadir.pid_alive(pid)
    with pytest.raises(valkey.exceptions.ConnectionError):
        valkey.Valkey.from_url(url, socket_connect_timeout=0.5).ping()
