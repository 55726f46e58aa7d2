"""Worker processes in the live worker registry (``echomq worker`` subprocesses with an app
on two queues), on a single server and on a cluster: a worker registers before it claims
and renews its registration every heartbeat; a clean exit removes it at once and a
SIGKILLed one drops out within two heartbeat periods of the kill; its busy list is the
jobs it runs; a quiet request stops its claims within one beat while what runs finishes;
a stop request drains it and it exits 0."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import Connector, native
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import jobs, workers
from tests.support.cli import kill_all
from tests.support.cli import worker as spawn
from tests.support.polling import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.topologies]

HEARTBEAT_MS = 600

APP = '''
import os, time
import valkey
from echomq import App
from echomq.connectors import urls
from valkey.cluster import ValkeyCluster

app = App(os.environ["ECHOMQ_URL"])
Q1, Q2 = os.environ["T_Q1"], os.environ["T_Q2"]
_target = urls.parse(os.environ["ECHOMQ_URL"])
r = (ValkeyCluster.from_url(_target.url) if _target.cluster
     else valkey.Valkey.from_url(_target.url))

@app.task(queue=Q1, name="hold")
def hold(gate):
    # runs until the test opens its gate (a key), so the test sees it running
    while not r.exists(gate):
        time.sleep(0.02)
    r.sadd(Q1 + ":done", gate)

@app.task(queue=Q2, name="hold2")
def hold2(gate):
    while not r.exists(gate):
        time.sleep(0.02)

@app.task(queue=Q2, name="quick")
def quick(n):
    r.sadd(Q2 + ":done", str(n))
'''


class Fleet:
    """The test's worker processes and its reads of the registry."""

    def __init__(self, tmp_path: Any, url: str) -> None:
        (tmp_path / "app_mod.py").write_text(APP)
        self.tmp, self.url = tmp_path, url
        suffix = uuid.uuid4().hex[:8]
        self.q1, self.q2 = f"p1{suffix}", f"p2{suffix}"
        self.conn = Connector.connect(url)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        proc = spawn("app_mod:app", "--heartbeat-ms", str(HEARTBEAT_MS), "--concurrency", "2",
                     "--beat-ms", "100", *args, url=self.url, cwd=self.tmp,
                     log=self.tmp / "worker.log",
                     env={"T_Q1": self.q1, "T_Q2": self.q2})
        self.procs.append(proc)
        return proc

    def record(self, proc: subprocess.Popen[bytes]) -> workers.WorkerRecord | None:
        return next((w for w in workers.live(self.conn) if w.pid == proc.pid), None)

    def registered(self, proc: subprocess.Popen[bytes]) -> workers.WorkerRecord:
        got: workers.WorkerRecord = wait_for(lambda: self.record(proc), 20, "registration",
                                             detail=self.log)
        return got

    def enqueue(self, queue: str, task: str, *args: Any) -> str:
        jid = ids.mint()
        jobs.enqueue(self.conn, queue, jid, encode(task, list(args)))
        return jid

    def gate(self) -> str:
        return f"{self.q1}:gate:{uuid.uuid4().hex[:6]}"

    def open(self, gate: str) -> None:
        self.conn.call("SET", gate, "1")

    def active(self, queue: str) -> set[str]:
        return {m.decode() for m in self.conn.call(
            "ZRANGE", keyspace.queue_key(queue, "active"), 0, -1)}

    def log(self) -> str:
        path = self.tmp / "worker.log"
        return path.read_text() if path.exists() else "(no log)"

    def close(self) -> None:
        kill_all(self.procs)
        self.conn.close()


@pytest.fixture
def fleet(tmp_path, url) -> Iterator[Fleet]:
    f = Fleet(tmp_path, url)
    yield f
    f.close()


def test_registration_heartbeat_and_clean_exit(fleet):
    proc = fleet.start()
    rec = fleet.registered(proc)
    assert rec.app == "app_mod:app" and rec.host and rec.pid == proc.pid
    assert rec.queues == [fleet.q1, fleet.q2] and rec.concurrency == 2
    assert rec.tasks == {fleet.q1: ["hold"], fleet.q2: ["hold2", "quick"]}
    assert rec.heartbeat_ms == HEARTBEAT_MS and rec.state == "running" and rec.busy == []
    # the wire the worker picked: 6 where every node has the EMQ module (the test servers)
    assert rec.version and rec.wire == (6 if native.available() else 4)
    # idle, it renews every heartbeat period: the SERVER-clock stamp moves on
    later = wait_for(lambda: (r := fleet.record(proc)) and r.seen_ms > rec.seen_ms and r,
                     3 * HEARTBEAT_MS / 1000, "a heartbeat")
    assert later.started_ms == rec.started_ms
    assert later.seen_ms - rec.seen_ms < 2 * HEARTBEAT_MS
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0, fleet.log()
    assert fleet.record(proc) is None  # gone the moment it exited
    assert not fleet.conn.call("EXISTS", keyspace.worker_key(rec.id))


def test_a_killed_worker_drops_out_within_two_heartbeats(fleet):
    proc = fleet.start()
    rec = fleet.registered(proc)
    proc.kill()
    proc.wait(10)
    died = time.monotonic()  # measured from the death itself
    assert fleet.record(proc) is not None  # nobody said goodbye: it is the expiry that ends it
    wait_for(lambda: fleet.record(proc) is None, 2 * HEARTBEAT_MS / 1000 + 0.25,
             "the dead worker's expiry")
    gone_after = time.monotonic() - died
    assert gone_after <= 2 * HEARTBEAT_MS / 1000 + 0.25
    assert fleet.conn.call("ZSCORE", workers.INDEX, rec.id) is None  # swept by the read


def test_the_busy_list_is_what_runs(fleet):
    proc = fleet.start()
    fleet.registered(proc)
    gate = fleet.gate()
    held = [fleet.enqueue(fleet.q1, "hold", gate) for _ in range(3)]  # 2 run, 1 waits
    other = fleet.enqueue(fleet.q2, "hold2", gate)

    def busy_matches() -> Any:
        rec = fleet.record(proc)
        running = fleet.active(fleet.q1) | fleet.active(fleet.q2)
        return rec and len(running) == 3 and {r.id for r in rec.busy} == running and rec

    rec = wait_for(busy_matches, 10, "busy list = active jobs",
                   detail=lambda: f"{fleet.record(proc)} {fleet.active(fleet.q1)}")
    by_id = {r.id: r for r in rec.busy}
    assert other in by_id and by_id[other].queue == fleet.q2 and by_id[other].task == "hold2"
    ones = [by_id[j] for j in held if j in by_id]
    assert len(ones) == 2 and all(r.task == "hold" and r.queue == fleet.q1 for r in ones)
    assert all(r.attempt == 1 for r in rec.busy)
    assert all(abs(r.started_ms - rec.now_ms) < 10_000 for r in rec.busy)
    fleet.open(gate)
    wait_for(lambda: (r := fleet.record(proc)) and not r.busy and not fleet.active(fleet.q1)
             and jobs.counts(fleet.conn, fleet.q1)["pending"] == 0, 10, "all done")


def test_quiet_stops_claims_within_a_beat_and_running_jobs_finish(fleet):
    proc = fleet.start()
    rec = fleet.registered(proc)
    gate = fleet.gate()
    running = [fleet.enqueue(fleet.q1, "hold", gate) for _ in range(2)]
    wait_for(lambda: fleet.active(fleet.q1) == set(running), 10, "two running")
    assert workers.request(fleet.conn, rec.id, "quiet") == [rec.id]
    time.sleep(0.1)  # one beat after the request landed
    later = [fleet.enqueue(fleet.q2, "quick", i) for i in range(3)]
    fleet.open(gate)
    wait_for(lambda: fleet.conn.call("SCARD", fleet.q1 + ":done") == 1, 10, "running finish")
    wait_for(lambda: not fleet.active(fleet.q1), 10, "their acks")
    time.sleep(0.5)
    # what ran finished; nothing was claimed after the quiet; the worker is up and says so
    assert jobs.counts(fleet.conn, fleet.q2)["pending"] == len(later)
    quiet = fleet.record(proc)
    assert quiet is not None and quiet.state == "quiet" and quiet.busy == []
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0, fleet.log()
    assert jobs.counts(fleet.conn, fleet.q2)["pending"] == len(later)


def test_stop_drains_and_exits_0(fleet):
    proc = fleet.start()
    rec = fleet.registered(proc)
    gate = fleet.gate()
    jid = fleet.enqueue(fleet.q1, "hold", gate)
    wait_for(lambda: fleet.active(fleet.q1) == {jid}, 10, "running")
    assert workers.request(fleet.conn, rec.id, "stop") == [rec.id]
    wait_for(lambda: (r := fleet.record(proc)) and r.state == "stopping", 5, "stopping")
    time.sleep(0.3)
    assert proc.poll() is None  # draining: the job still runs
    fleet.open(gate)
    assert proc.wait(20) == 0, fleet.log()
    assert fleet.conn.call("SISMEMBER", fleet.q1 + ":done", gate)
    assert fleet.record(proc) is None
    assert "stop requested" in fleet.log()


def test_the_worker_log_names_its_registration(fleet):
    proc = fleet.start()
    rec = fleet.registered(proc)
    wait_for(lambda: f"registered as {rec.id}" in fleet.log(), 10, "the start line")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
