"""A worker's log, as an operator reads it (``echomq worker`` subprocesses): a server outage
is one WARNING when the worker degrades and one INFO when it recovers, not a line per loop
per retry; a failure is one line naming the task, a timeout too."""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import Connector
from echomq.core import ids
from echomq.core.payload import encode
from echomq.embedded.launch import free_port
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs, workers
from tests.support.cli import kill_all
from tests.support.cli import worker as spawn
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow

APP = '''
import os, time
from echomq import App

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]

@app.task(queue=Q, name="flaky", max_attempts=2, retry_delay_ms=50)
def flaky(n):
    raise ValueError("boom " + str(n))

@app.task(queue=Q, name="sleepy", timeout=0.2, max_attempts=1)
def sleepy():
    time.sleep(1)

@app.task(queue=Q + "b", name="other")
def other():
    pass
'''


@pytest.fixture
def procs() -> Iterator[list[Any]]:
    running: list[Any] = []
    yield running
    kill_all(running)


def _lines(path: Any) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_an_outage_is_one_warning_and_one_info(tmp_path, procs):
    srv = EmbeddedServer(data_dir=tmp_path / "data", port=free_port(), password="pw",
                         native=False)
    srv.start()
    queue = "out" + uuid.uuid4().hex[:6]
    (tmp_path / "app_mod.py").write_text(APP)
    log = tmp_path / "worker.log"
    try:
        proc = spawn("app_mod:app", "--beat-ms", "100", "--heartbeat-ms", "500",
                     url=srv.url, cwd=tmp_path, log=log, env={"T_QUEUE": queue})
        procs.append(proc)
        conn = Connector.connect(srv.url)
        wait_for(lambda: any(w.pid == proc.pid for w in workers.live(conn)), 20, "registered")
        conn.close()
        # its start-up line is written (an idle queue's lease is taken only when the
        # queue has something to beat, so that line may come later: not the outage's)
        wait_for(lambda: any(" serving " in ln for ln in _lines(log)), 10, "start-up")
        before = len(_lines(log))
        srv.stop()
        time.sleep(6)  # a six-second outage: every loop of the worker retries through it
        srv = EmbeddedServer(data_dir=tmp_path / "data", port=srv.port, password="pw",
                             native=False)
        srv.start()
        conn = Connector.connect(srv.url)
        wait_for(lambda: any(w.pid == proc.pid for w in workers.live(conn)), 30,
                 "registered again", detail=lambda: log.read_text())
        jid = ids.mint()
        jobs.enqueue(conn, queue + "b", jid, encode("other", []))
        wait_for(lambda: any(jid in ln for ln in _lines(log)), 10, "serving again")
        # its loops all get through within a second of the first (the one that answers
        # wakes the others from their backoff), and then the outage's end is one line
        wait_for(lambda: any("recovered" in ln for ln in _lines(log)), 5, "the INFO line",
                 detail=log.read_text)
        conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        srv.stop()
    during = [ln for ln in _lines(log)[before:] if jid not in ln
              and "stopped cleanly" not in ln and "SIGTERM" not in ln
              and not re.search(r"metronome \S+ holds \d+ queue", ln)]
    warnings = [ln for ln in during if " WARNING " in ln]
    infos = [ln for ln in during if " INFO " in ln and "recovered" in ln]
    assert len(warnings) == 1, "\n".join(during)
    assert "degraded" in warnings[0]
    assert len(infos) == 1 and "answers again after" in infos[0], "\n".join(during)
    assert len(during) == 2, "\n".join(during)


def test_a_failure_is_one_line_naming_the_task(tmp_path, server, procs):
    queue = "logs" + uuid.uuid4().hex[:6]
    (tmp_path / "app_mod.py").write_text(APP)
    log = tmp_path / "worker.log"
    proc = spawn("app_mod:app", "--beat-ms", "50", url=server.url, cwd=tmp_path, log=log,
                 env={"T_QUEUE": queue})
    procs.append(proc)
    conn = Connector.connect(server.url)
    wait_for(lambda: any(w.pid == proc.pid for w in workers.live(conn)), 20, "registered")
    failing, timing = ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, failing, encode("flaky", [7]))
    jobs.enqueue(conn, queue, timing, encode("sleepy", []))
    wait_for(lambda: jobs.counts(conn, queue)["dead"] == 2, 15, "both dead")
    conn.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    lines = _lines(log)
    flaky = [ln for ln in lines if failing in ln]
    assert len(flaky) == 2, "\n".join(lines)  # attempt 1 retried, attempt 2 dead
    assert all(" flaky: " in ln for ln in flaky)
    assert " WARNING " in flaky[0] and "retry in 50 ms: ValueError: boom 7" in flaky[0]
    assert " ERROR " in flaky[1] and "dead after 2 runs (2 failures)" in flaky[1]
    timed = [ln for ln in lines if timing in ln]
    assert len(timed) == 1, "\n".join(lines)
    assert " sleepy: " in timed[0] and "TimeoutError: job exceeded its timeout" in timed[0]
    assert not any(" ?: " in ln or " ? " in ln for ln in lines)
