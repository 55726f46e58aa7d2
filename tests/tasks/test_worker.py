"""Worker processes (``echomq worker``) against a real Valkey: SIGKILL mid-job → reaped and
finished elsewhere; SIGTERM drains within the grace; two processes x 20 on 5,000 jobs
count every side effect exactly once; two metronomes promote once per beat, not twice."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import valkey

from echomq import scripts
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import jobs
from tests.support.cli import kill_all
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

APP = '''
import os, time
import valkey
from echomq import App

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]
from echomq.connectors import urls
from valkey.cluster import ValkeyCluster

_target = urls.parse(os.environ["ECHOMQ_URL"])  # a cluster URL gets a cluster client
r = (ValkeyCluster.from_url(_target.url) if _target.cluster
     else valkey.Valkey.from_url(_target.url))

@app.task(queue=Q, name="count", lease_ms=int(os.environ.get("T_LEASE", "30000")))
def count(n):
    r.hincrby(Q + ":effects", str(n), 1)

@app.task(queue=Q, name="slow", lease_ms=int(os.environ.get("T_LEASE", "30000")))
def slow(key, first_sleep):
    if r.incr(Q + ":started:" + key) == 1:
        time.sleep(first_sleep)
    r.sadd(Q + ":done", key)
'''


class Workers:
    """Spawns ``python -m echomq.cli worker app_mod:app`` processes; kills leftovers."""

    def __init__(self, tmp_path, url: str, queue: str) -> None:
        (tmp_path / "app_mod.py").write_text(APP)
        self.cwd, self.url, self.queue = tmp_path, url, queue
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, lease_ms: int = 30_000) -> subprocess.Popen[bytes]:
        env = {**os.environ, "ECHOMQ_URL": self.url, "T_QUEUE": self.queue,
               "T_LEASE": str(lease_ms)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "worker", "app_mod:app", *args],
            cwd=self.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        kill_all(self.procs)
        for p in self.procs:
            if p.stdout:
                p.stdout.close()


@pytest.fixture
def workers(tmp_path, url, queue) -> Iterator[Workers]:
    w = Workers(tmp_path, url, queue)
    yield w
    w.close()


def put(conn, queue: str, task: str, *args) -> str:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode(task, args))
    return jid


@pytest.mark.topologies
def test_sigkill_mid_job_is_reaped_and_completed_by_another_worker(workers, conn, raw, queue):
    lease = 1000
    first = workers.start("--concurrency", "2", lease_ms=lease)
    jid = put(conn, queue, "slow", "k", 60)
    wait_for(lambda: raw.get(f"{queue}:started:k") == b"1", 15, "the first run to start")
    first.send_signal(signal.SIGKILL)
    first.wait(5)
    killed = time.monotonic()
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"active"
    workers.start("--concurrency", "2", lease_ms=lease)
    wait_for(lambda: raw.sismember(f"{queue}:done", "k"), 15, "the job to complete elsewhere")
    assert time.monotonic() - killed < 10
    assert raw.get(f"{queue}:started:k") == b"2"  # ran twice: at least once, nothing lost
    assert set(raw.smembers(f"{queue}:done")) == {b"k"}
    wait_for(lambda: not raw.exists(keyspace.job_key(queue, jid)), 5, "the ack")
    assert jobs.counts(conn, queue) == {s: 0 for s in jobs.STATE_SETS}


@pytest.mark.topologies
def test_sigterm_stops_claiming_and_drains_in_flight_jobs(workers, conn, raw, queue):
    proc = workers.start("--concurrency", "3", "--grace", "10")
    for i in range(6):
        put(conn, queue, "slow", f"k{i}", 1.0)
    started = lambda: sum(  # noqa: E731
        1 for i in range(6) if raw.get(f"{queue}:started:k{i}") == b"1")
    wait_for(lambda: started() == 3, 15, "three jobs in flight")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert time.monotonic() - t0 < 5
    assert started() == 3  # no claims after the signal
    assert len(raw.smembers(f"{queue}:done")) == 3  # the in-flight ones finished
    counts = jobs.counts(conn, queue)
    assert counts["active"] == 0 and counts["pending"] == 3
    out = proc.stdout.read().decode()
    assert "draining" in out and "stopped cleanly" in out


def test_sigterm_past_grace_leaves_the_job_to_the_reaper(workers, conn, raw, queue):
    proc = workers.start("--grace", "0.3", lease_ms=30_000)
    jid = put(conn, queue, "slow", "long", 60)
    wait_for(lambda: raw.get(f"{queue}:started:long") == b"1", 15, "the job to start")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 3  # abandoned jobs: not a clean exit
    assert time.monotonic() - t0 < 5
    assert jid in proc.stdout.read().decode()  # named
    # not acked, not failed: still leased, so the reaper returns it once the lease lapses
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"active"
    assert raw.zscore(keyspace.queue_key(queue, "active"), jid) is not None
    assert not raw.sismember(f"{queue}:done", "long")


@pytest.mark.topologies
def test_two_workers_by_twenty_count_five_thousand_effects_once(workers, conn, raw, queue):
    n = 5000
    items = [(ids.mint(), encode("count", [i])) for i in range(n)]
    for i in range(0, n, 1000):
        jobs.enqueue_many(conn, queue, items[i:i + 1000])
    # warnings only: 5,000 job lines would fill the unread stdout pipe and stall the workers
    a = workers.start("--concurrency", "20", "--log-level", "warning")
    b = workers.start("--concurrency", "20", "--log-level", "warning")
    wait_for(lambda: raw.hlen(f"{queue}:effects") == n
             and jobs.counts(conn, queue)["active"] == 0, 90, "every effect")
    effects = raw.hgetall(f"{queue}:effects")
    assert len(effects) == n
    assert {int(v) for v in effects.values()} == {1}
    assert jobs.counts(conn, queue) == {s: 0 for s in jobs.STATE_SETS}
    for p in (a, b):
        p.send_signal(signal.SIGTERM)
    assert a.wait(10) == 0 and b.wait(10) == 0


def count_promotes(url: str, queue: str, seconds: float) -> tuple[int, set[str]]:
    """Count the promote calls the server receives for ``queue`` (MONITOR, a real count
    of what every process sent: the script, or EMQ.PROMOTE at wire 6, which a worker picks
    where the module is loaded), and the client addresses that sent them."""
    sha = scripts.sha("promote").encode()
    key = keyspace.queue_key(queue, "schedule").encode()
    client = valkey.Valkey.from_url(url)
    seen: list[str] = []
    stop = threading.Event()

    addr = re.compile(rb"^\S+ \[\d+ ([^\]]+)\]")
    errors: list[BaseException] = []

    def listen() -> None:
        # raw MONITOR lines ('<ts> [<db> <addr>] "EVALSHA" "<sha>" ...'), matched as bytes:
        # no reliance on the client's parsing of every command that goes by
        try:
            with client.monitor() as m:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline and not stop.is_set():
                    line = m.connection.read_response()  # the workers' beats keep it flowing
                    if isinstance(line, str):
                        line = line.encode()
                    if (sha in line or b'"EMQ.PROMOTE"' in line) and key in line:
                        found = addr.match(line)
                        seen.append(found.group(1).decode() if found else "?")
        except BaseException as exc:  # surfaced below, not lost in the thread
            errors.append(exc)

    t = threading.Thread(target=listen)
    t.start()
    t.join(seconds + 5)
    stop.set()
    assert not errors, errors
    # a worker process has several pooled connections: name them by the process
    names = {c["addr"]: c.get("name", "") for c in client.client_list()}
    client.close()
    return len(seen), {names.get(addr, addr) for addr in seen}


@pytest.mark.parametrize("metronome", [True, False], ids=["metronome", "no-metronome"])
def test_two_worker_processes_promote_once_per_beat(workers, url, raw, queue, metronome):
    beat = 100
    flags = ["--beat-ms", str(beat)] + ([] if metronome else ["--no-metronome"])
    # a lease to watch (ten minutes out): an idle queue is not beaten at all (the survey),
    # so the queue must need its beats for the count to measure the election
    raw.zadd(keyspace.queue_key(queue, "active"), {"JOB-watched": time.time() * 1000 + 600_000})
    a = workers.start(*flags)
    b = workers.start(*flags)
    lease = keyspace.queue_key(queue, "metronome")
    names = lambda: {c.get("name") for c in raw.client_list()  # noqa: E731
                     if c.get("name", "").startswith("echomq-worker-")}
    wait_for(lambda: names() >= {f"echomq-worker-{a.pid}", f"echomq-worker-{b.pid}"}, 15,
             "both worker processes to connect")
    if metronome:
        wait_for(lambda: raw.exists(lease), 15, "a metronome to hold the queue")
    time.sleep(0.5)  # both processes beating
    assert a.poll() is None and b.poll() is None
    window = 3.0
    n, senders = count_promotes(url, queue, window)
    beats = window * 1000 / beat
    if metronome:
        assert 0.6 * beats <= n <= 1.25 * beats, (n, beats)
        assert len(senders) == 1, senders  # one holder process did every pass
    else:  # the count measures something: without election both processes promote
        assert n >= 1.6 * beats, (n, beats)
        assert len(senders) == 2, senders
    for p in (a, b):
        p.send_signal(signal.SIGTERM)
    assert a.wait(10) == 0 and b.wait(10) == 0
