"""An empty server URL is no URL, in every entry point: ``App("")``, and ``ECHOMQ_URL=`` for
``echomq enqueue``, ``echomq worker`` (whose app says ``App(os.environ["ECHOMQ_URL"])``) and
``echomq dashboard``: each uses the data dir's embedded server. ``echomq worker`` used to
refuse with ``not a server URL: ''`` where ``echomq enqueue`` went on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from echomq import App
from tests.support.cli import echomq

pytestmark = pytest.mark.slow  # an embedded server of its own and four processes

APP = '''
import os
from echomq import App

app = App(os.environ["ECHOMQ_URL"])  # "" here

@app.task(queue="empties", name="double", keep_result=60)
def double(n):
    return 2 * n
'''


def test_an_empty_url_means_the_embedded_server_everywhere(tmp_path, monkeypatch):
    data = tmp_path / "data"
    env = {"ECHOMQ_URL": "", "ECHOMQ_DATA": str(data)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "empties_app.py").write_text(APP)
    app = App("")

    @app.task(queue="empties", name="double", keep_result=60)
    def double(n: int) -> int:
        return 2 * n

    try:
        first = double.enqueue(1)  # starts the data dir's embedded server
        assert app.server_record is not None and app.url.startswith("valkey://")

        queued = echomq("enqueue", "double", "21", "--app", "empties_app:app", cwd=tmp_path,
                        env=env)
        assert queued.returncode == 0, queued.stderr
        second = queued.stdout.split()[0]

        worker = echomq("worker", "empties_app:app", "--burst", "--beat-ms", "50",
                        cwd=tmp_path, env=env, timeout=60)
        assert worker.returncode == 0, worker.stderr
        assert "not a server URL" not in worker.stderr
        assert app.result(first, timeout=5) == 2
        assert app.result(second, timeout=5) == 42

        board = subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "dashboard", "--port", "0"], cwd=tmp_path,
            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            assert board.stdout is not None
            line = board.stdout.readline()
            assert "EchoMQ dashboard" in line, board.stderr.read() if board.stderr else ""
            link = line.split(" on ", 1)[1].split(" ", 1)[0]
            with urllib.request.urlopen(link, timeout=10) as resp:
                page = resp.read().decode()
            assert "empties" in page  # the queue the others wrote: the same server
        finally:
            board.send_signal(signal.SIGTERM)
            board.wait(10)
    finally:
        app.close()
        assert echomq("server", "stop", cwd=tmp_path, env=env).returncode == 0
