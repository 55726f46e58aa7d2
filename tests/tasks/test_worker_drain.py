"""SIGTERM on a worker serving several queues (``echomq worker mod:app`` as a subprocess):
every queue's in-flight jobs get the grace, an idle queue does not end the wait, and a
worker that abandons jobs exits non-zero naming them."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from echomq.core import keyspace
from tests.support.cli import echomq, popen
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

APP = '''
import os, time
import valkey
from echomq import App

app = App(os.environ["ECHOMQ_URL"])
P = os.environ["T_PREFIX"]
r = valkey.Valkey.from_url(os.environ["ECHOMQ_URL"])

@app.task(queue=P + "-idle", name="noop")
def noop():
    pass

@app.task(queue=P + "-busy", name="slow")
def slow(key, secs):
    r.set(P + ":started:" + key, time.time())
    time.sleep(secs)
    r.sadd(P + ":done", key)

@app.task(queue=P + "-other", name="aslow")
async def aslow(key, secs):
    import asyncio
    r.set(P + ":started:" + key, time.time())
    await asyncio.sleep(secs)
    r.sadd(P + ":done", key)
'''


def start(tmp_path, url: str, prefix: str, *args: str) -> subprocess.Popen[bytes]:
    (tmp_path / "drain_app.py").write_text(APP)
    return popen("worker", "drain_app:app", *args, url=url, cwd=tmp_path,
                 env={"T_PREFIX": prefix})


def enqueue(tmp_path, url: str, prefix: str, task: str, *args: str) -> str:
    done = echomq("enqueue", task, *args, "--app", "drain_app:app", url=url, cwd=tmp_path,
                  env={"T_PREFIX": prefix})
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


@pytest.mark.parametrize("queues", [None, "idle,busy,other"], ids=["app-queues", "--queues"])
def test_sigterm_waits_for_every_queue_within_the_grace(tmp_path, url, raw, queue, queues):
    prefix = queue
    flags = ["--grace", "20"]
    if queues:
        flags += ["--queues", ",".join(f"{prefix}-{q}" for q in queues.split(","))]
    proc = start(tmp_path, url, prefix, *flags)
    try:
        a = enqueue(tmp_path, url, prefix, "slow", "a", "1.5")
        b = enqueue(tmp_path, url, prefix, "aslow", "b", "1.5")
        wait_for(lambda: raw.exists(f"{prefix}:started:a", f"{prefix}:started:b") == 2, 15,
                 "both jobs to start")
        # the worker registered every queue it serves, the idle one included
        assert raw.sismember(keyspace.registry_key(), f"{prefix}-idle")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(15)
        exited = time.time()
        err = proc.stderr.read().decode()
        assert code == 0, err
        assert time.monotonic() - t0 < 10
        # it waited for the jobs, not for the idle queue: it exited after the later job's
        # 1.5 s ran out (both clocks are this machine's wall clock; the SIGTERM may come
        # late after the start under load, so the bound counts from the start, not the signal)
        last_start = max(float(raw.get(f"{prefix}:started:{k}")) for k in ("a", "b"))
        assert exited - last_start >= 1.5 - 0.05
        assert set(raw.smembers(f"{prefix}:done")) == {b"a", b"b"}
        for q, jid in ((f"{prefix}-busy", a), (f"{prefix}-other", b)):
            assert raw.zscore(keyspace.queue_key(q, "active"), jid) is None
            assert not raw.exists(keyspace.job_key(q, jid))  # acked (and deleted)
        assert "stopped cleanly" in err and "unfinished" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_a_worker_that_abandons_jobs_exits_non_zero_and_names_them(tmp_path, url, raw, queue):
    prefix = queue
    proc = start(tmp_path, url, prefix, "--grace", "0.5")
    try:
        a = enqueue(tmp_path, url, prefix, "slow", "a", "30")
        b = enqueue(tmp_path, url, prefix, "aslow", "b", "30")
        wait_for(lambda: raw.exists(f"{prefix}:started:a", f"{prefix}:started:b") == 2, 15,
                 "both jobs to start")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(15)
        err = proc.stderr.read().decode()
        assert code == 3, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("echomq: abandoned 2 running jobs to the reaper"), err
        assert a in last and b in last
        assert "Traceback" not in err
        # left leased, not failed: the reaper returns them once the lease lapses
        assert raw.hget(keyspace.job_key(f"{prefix}-busy", a), "state") == b"active"
        assert raw.hget(keyspace.job_key(f"{prefix}-other", b), "state") == b"active"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
