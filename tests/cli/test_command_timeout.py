"""``--command-timeout`` (``App(timeout=)``) as a user passes it: a command whose server
stops answering (the tests' fault proxy, blackholed) gives up after that long instead of
valkey-py's 5 s; ``echomq worker --command-timeout`` refuses a value that is no positive
number of seconds and runs with one that is."""

from __future__ import annotations

import time

from tests.support.cli import echomq
from tests.support.faults import FaultProxy

APP = """
from echomq import App
app = App()

@app.task(queue="{q}")
def ok(n):
    return n
"""


def test_a_command_gives_up_after_its_command_timeout(server, queue):
    with FaultProxy.to(server.url) as proxy:
        done = echomq("stats", "--command-timeout", "0.5", url=proxy.url())
        assert done.returncode == 0, done.stderr
        proxy.blackhole()
        t0 = time.monotonic()
        done = echomq("stats", "--command-timeout", "0.5", url=proxy.url(), timeout=30)
        took = time.monotonic() - t0
        assert done.returncode != 0
        assert "cannot reach Valkey" in done.stderr or "Timeout" in done.stderr, done.stderr
        # the interpreter's start is in it too; valkey-py's default alone is 5 s
        assert took < 4.5, took


def test_worker_command_timeout(tmp_path, url, queue):
    (tmp_path / "app_mod.py").write_text(APP.format(q=queue))
    done = echomq("worker", "app_mod:app", "--burst", "--command-timeout", "0", url=url,
                  cwd=tmp_path)
    assert done.returncode != 0 and "--command-timeout must be > 0" in done.stderr
    assert echomq("enqueue", "ok", "1", "--app", "app_mod:app", url=url,
                  cwd=tmp_path).returncode == 0
    done = echomq("worker", "app_mod:app", "--burst", "--command-timeout", "0.5", url=url,
                  cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "degraded" not in done.stderr
