"""A worker's lifecycle (issue 32): ``App(on_startup=..., on_shutdown=...)`` run once per
worker process with a context handlers read as ``current_job().context``, the shutdown
hook after the drain (on SIGTERM too), and a failing startup hook stopping the worker with
one line; all in a real ``echomq worker`` subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from echomq import App
from echomq.tasks import lifecycle
from tests.support.polling import wait_for

APP = '''
import asyncio, os
from echomq import App, current_job

calls = os.environ["T_CALLS"]


def note(line):
    with open(calls, "a") as f:
        f.write(f"{os.getpid()} {line}\\n")


async def startup(ctx):
    await asyncio.sleep(0)
    ctx.pool = {"dsn": "db://pool"}
    note("startup")


def shutdown(ctx):
    note(f"shutdown {ctx.pool['dsn']}")


app = App(os.environ["ECHOMQ_URL"], on_startup=startup, on_shutdown=shutdown,
          keep_completed=100)


@app.task(queue=os.environ["T_QUEUE"], name="uses_pool")
def uses_pool(n):
    note(f"job {n} {current_job().context.pool['dsn']}")
    return n


@app.task(queue=os.environ["T_QUEUE"], name="uses_pool_async")
async def uses_pool_async(n):
    note(f"ajob {n} {current_job().context.pool['dsn']}")
    return n


def broken(ctx):
    raise ConnectionRefusedError("db down")


bad = App(os.environ["ECHOMQ_URL"], on_startup=broken)


@bad.task(queue=os.environ["T_QUEUE"], name="never")
def never():
    note("never")
'''


def start(where: Path, url: str, queue: str, target: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ECHOMQ_URL": url, "T_QUEUE": queue, "PYTHONUNBUFFERED": "1",
           "T_CALLS": str(where / "calls.txt")}
    return subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "worker", target, "--beat-ms", "50",
         "--concurrency", "4"],
        cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def calls(where: Path) -> list[str]:
    path = where / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_hooks_run_once_per_worker_process(tmp_path: Path, url: str) -> None:
    (tmp_path / "app_mod.py").write_text(APP)
    queue = "tl" + uuid.uuid4().hex[:10]
    proc = start(tmp_path, url, queue, "app_mod:app")
    app = App(url)  # the producer: the same task names, no import of the module
    try:
        sync = app.task(queue=queue, name="uses_pool")(lambda n: n)
        async_ = app.task(queue=queue, name="uses_pool_async")(lambda n: n)
        for n in range(3):
            sync.enqueue(n)
            async_.enqueue(n)
        wait_for(lambda: len(calls(tmp_path)) >= 7, 20, "six jobs",
                 detail=lambda: calls(tmp_path))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        app.close()
    got = calls(tmp_path)
    pids = {line.split()[0] for line in got}
    assert pids == {str(proc.pid)}
    words = [line.split(" ", 1)[1] for line in got]
    assert words[0] == "startup" and words[-1] == "shutdown db://pool"
    assert words.count("startup") == 1 and words.count("shutdown db://pool") == 1
    assert sorted(words[1:-1]) == sorted(
        [f"job {n} db://pool" for n in range(3)] + [f"ajob {n} db://pool" for n in range(3)])


@pytest.mark.slow
def test_a_failing_startup_stops_the_worker_with_one_line(tmp_path: Path, url: str) -> None:
    (tmp_path / "app_mod.py").write_text(APP)
    queue = "tl" + uuid.uuid4().hex[:10]
    proc = start(tmp_path, url, queue, "app_mod:bad")
    try:
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "Traceback" not in err
    line = [x for x in err.splitlines() if x.startswith("echomq:")]
    assert line == ["echomq: on_startup broken failed: ConnectionRefusedError: db down "
                    "(the worker did not start)"], err
    assert calls(tmp_path) == []


def test_hooks_in_process_context_and_shutdown_errors(caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    seen: list[Any] = []

    def startup(ctx: SimpleNamespace) -> None:
        ctx.value = 7

    async def shutdown(ctx: SimpleNamespace) -> None:
        seen.append(ctx.value)
        raise RuntimeError("close failed")

    app = SimpleNamespace(on_startup=startup, on_shutdown=shutdown)

    async def main() -> None:
        from echomq.runtime.handler import worker_context
        async with lifecycle.hooks(app) as ctx:
            assert worker_context.get() is ctx and ctx.value == 7
        assert worker_context.get() is not ctx  # reset after the worker's life
        assert vars(ctx) == {}  # emptied on shutdown

    asyncio.run(main())
    assert seen == [7]
    assert "on_shutdown" in caplog.text and "close failed" in caplog.text
