"""Job control from the command line, each command a subprocess: ``echomq cancel``,
``pause``/``resume`` (and ``stats`` showing it), ``enqueue --priority/--group/--unique``,
and ``echomq worker --events module:function --timeout``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from echomq.core import ids, keyspace
from echomq.verbs import jobs, registry
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def echomq(*args: str, url: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "echomq.cli", *args, "--url", url],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def test_cancel_waiting_then_absent(url, raw, conn, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"p")
    done = echomq("cancel", jid, "--queue", queue, url=url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [jid, "cancelled", queue]
    assert raw.zscore(k(queue, "pending"), jid) is None
    again = echomq("cancel", jid, "--queue", queue, url=url)
    assert again.returncode == 1
    assert again.stdout == ""
    assert f"{jid}: no waiting or running job" in again.stderr
    assert "Traceback" not in again.stderr


def test_cancel_finds_the_queue_by_discovery_and_refuses_a_foreign_id(url, conn, queue):
    jid = ids.mint()
    jobs.enqueue_in(conn, queue, jid, b"p", 60_000)
    found = echomq("cancel", jid, url=url)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [jid, "cancelled", queue]
    bad = echomq("cancel", "nope", "--queue", queue, url=url)
    assert bad.returncode == 2
    assert "not a job id" in bad.stderr and "Traceback" not in bad.stderr
    bad_q = echomq("pause", "a{b", url=url)
    assert bad_q.returncode == 2 and "Traceback" not in bad_q.stderr


def test_pause_resume_shown_in_stats(url, raw, conn, queue):
    registry.add(conn, [queue])  # a queue some producer used (an unknown name is refused)
    paused = echomq("pause", queue, url=url)
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.strip() == f"{queue} paused"
    assert jobs.is_paused(conn, queue)
    jobs.enqueue(conn, queue, ids.mint(), b"p")
    assert jobs.claim(conn, queue, 1000) is None  # a paused queue claims nothing
    stats = echomq("stats", "--queue", queue, url=url)
    assert stats.returncode == 0
    assert stats.stdout.splitlines()[1].split()[-1] == "paused"
    resumed = echomq("resume", queue, url=url)
    assert resumed.returncode == 0 and resumed.stdout.strip() == f"{queue} resumed"
    assert not jobs.is_paused(conn, queue)
    assert echomq("stats", "--queue", queue, url=url).stdout.splitlines()[1].split()[-1] == (
        "running")
    assert jobs.claim(conn, queue, 1000) is not None


def test_enqueue_priority_group_and_unique(url, raw, queue):
    low = echomq("enqueue", "t", "--queue", queue, "--priority", "5", url=url)
    assert low.returncode == 0, low.stderr
    low_id = low.stdout.split()[0]
    assert raw.zscore(k(queue, "pending"), low_id) == 5
    grouped = echomq("enqueue", "t", "--queue", queue, "--group", "acme", url=url)
    gid = grouped.stdout.split()[0]
    assert raw.hget(keyspace.job_key(queue, gid), "group") == b"acme"
    first = echomq("enqueue", "t", "--queue", queue, "--unique", "k1", url=url)
    assert first.returncode == 0, first.stderr
    owner = first.stdout.split()[0]
    second = echomq("enqueue", "t", "--queue", queue, "--unique", "k1", url=url)
    assert second.returncode == 1
    assert second.stdout.split() == [owner, "duplicate", queue]
    bad = echomq("enqueue", "t", "--queue", queue, "--priority", "-3", url=url)
    assert bad.returncode != 0 and "priority" in bad.stderr and "Traceback" not in bad.stderr


APP = '''
import asyncio, os
from echomq import App, current_job

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]

@app.task(queue=Q, name="fine")
def fine():
    return None

@app.task(queue=Q, name="hang", max_attempts=1)
async def hang():
    await asyncio.sleep(30)
'''

HOOKS = '''
import json, os

def on_event(ev):
    with open(os.environ["T_EVENTS"], "a") as f:
        f.write(json.dumps([ev.kind, ev.job_id]) + "\\n")
'''


def test_worker_events_and_timeout_flags(tmp_path, url, conn, queue):
    (tmp_path / "ctl_app.py").write_text(APP)
    (tmp_path / "ctl_hooks.py").write_text(HOOKS)
    events = tmp_path / "events.jsonl"
    env = {**os.environ, "ECHOMQ_URL": url, "T_QUEUE": queue, "T_EVENTS": str(events)}
    from echomq.core.payload import encode

    fine, hang = ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, fine, encode("fine"))
    jobs.enqueue(conn, queue, hang, encode("hang"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "worker", "ctl_app:app", "--events",
         "ctl_hooks:on_event", "--timeout", "0.3", "--beat-ms", "50"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def lines() -> list[list[str]]:
            if not events.exists():
                return []
            import json

            return [json.loads(x) for x in events.read_text().splitlines()]

        wait_for(lambda: ["dead", hang] in lines() and ["completed", fine] in lines(), 20,
                 "events from the CLI worker")
        assert ["timed_out", hang] in lines() and ["started", fine] in lines()
        assert b"TimeoutError" in (conn.call("HGET", keyspace.job_key(queue, hang), "error")
                                   or b"")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out.decode()
    bad = subprocess.run([sys.executable, "-m", "echomq.cli", "worker", "ctl_app:app",
                          "--events", "ctl_hooks:nope"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0
    assert "--events" in bad.stderr and "Traceback" not in bad.stderr
    time.sleep(0)
