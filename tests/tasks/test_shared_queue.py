"""Two apps on one server with a queue name in common (two projects on the shared default
server): each worker hands the other app's jobs back without spending an attempt, so no
job is lost and each runs once, by its own app; one WARNING per worker names both apps.
With no live worker serving a task, its job dies on its first attempt, as before."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import Connector
from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs, workers
from tests.support.cli import kill_all
from tests.support.cli import worker as spawn
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow

APP = '''
import os
import valkey
from echomq import App

app = App(os.environ["ECHOMQ_URL"])
r = valkey.Valkey.from_url(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]

@app.task(queue=Q, name="{name}")
def work(n):
    r.hincrby(Q + ":ran", "{name}:" + str(n), 1)
'''


@pytest.fixture
def two_apps(tmp_path, server) -> Iterator[Any]:
    queue = "shared" + uuid.uuid4().hex[:6]
    for mod, name in (("proj_a", "send_email"), ("proj_b", "resize_image")):
        (tmp_path / f"{mod}.py").write_text(APP.replace("{name}", name))
    procs: list[Any] = []

    def start(mod: str) -> Any:
        proc = spawn(f"{mod}:app", "--beat-ms", "50", "--heartbeat-ms", "1000",
                     url=server.url, cwd=tmp_path, log=tmp_path / f"{mod}.log",
                     env={"T_QUEUE": queue})
        procs.append(proc)
        return proc

    conn = Connector.connect(server.url)
    yield start, conn, queue, tmp_path
    kill_all(procs)
    conn.close()


def _live_pids(conn: Any) -> set[int]:
    return {w.pid for w in workers.live(conn)}


def test_two_apps_sharing_a_queue_lose_no_job(two_apps):
    start, conn, queue, tmp = two_apps
    a, b = start("proj_a"), start("proj_b")
    wait_for(lambda: {a.pid, b.pid} <= _live_pids(conn), 20, "both registered")
    n = 40
    minted = {}
    for i in range(n):
        for task in ("send_email", "resize_image"):
            jid = ids.mint()
            minted[jid] = task
            jobs.enqueue(conn, queue, jid, encode(task, [i]))

    def ran() -> dict[bytes, bytes]:
        return conn.call("HGETALL", queue + ":ran") or {}

    def detail() -> str:
        return f"{jobs.counts(conn, queue)} {len(ran())}"

    wait_for(lambda: len(ran()) == 2 * n and sum(jobs.counts(conn, queue).values()) == 0,
             60, "every job run", detail=detail)
    counts = jobs.counts(conn, queue)
    assert counts["dead"] == 0
    assert all(int(v) == 1 for v in ran().values())  # each once
    for proc in (a, b):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    logs = {m: (tmp / f"{m}.log").read_text() for m in ("proj_a", "proj_b")}
    # the worker that met the other app's task says so once, naming both apps
    warned = [line for text in logs.values() for line in text.splitlines()
              if "WARNING" in line and "does not declare task" in line]
    assert 1 <= len(warned) <= 2, logs
    for line in warned:
        assert "proj_a:app" in line and "proj_b:app" in line
    stats = jobs.stats(conn, queue)
    assert stats["dead"] == 0 and stats["completed"] == 2 * n


def test_with_no_live_owner_the_job_dies_at_once(two_apps):
    start, conn, queue, tmp = two_apps
    a = start("proj_a")
    wait_for(lambda: a.pid in _live_pids(conn), 20, "registered")
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("resize_image", [1]))
    wait_for(lambda: jobs.counts(conn, queue)["dead"] == 1, 10, "dead-lettered")
    fields = jobs.get(conn, queue, jid)
    assert fields["attempts"] == "1" and "unknown task 'resize_image'" in fields["error"]
    a.send_signal(signal.SIGTERM)
    assert a.wait(20) == 0
    log = (tmp / "proj_a.log").read_text()
    dead = [ln for ln in log.splitlines() if jid in ln]
    assert len(dead) == 1 and "resize_image" in dead[0]  # one line, naming the task
