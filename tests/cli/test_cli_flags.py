"""Logs and flags, as a user runs them (``echomq`` subprocesses): ``--version``; flags after
the sub-command; ``worker --burst`` drains what is due and exits 0; one INFO line per
finished job; the start line names the server without its password; ``worker --help``
shows the defaults."""

from __future__ import annotations

import json
import time
from importlib import metadata
from urllib.parse import urlsplit

import pytest

from echomq.core import keyspace
from tests.support.cli import echomq

APP = """
from echomq import App
app = App()

@app.task(queue="{q}-a", name="ok")
def ok(n):
    return n

@app.task(queue="{q}-b", name="bad", max_attempts=1)
def bad():
    raise ValueError("bad input 42")
"""


def test_version():
    done = echomq("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"echomq {metadata.version('echomq')}"


def test_worker_help_shows_the_defaults():
    done = echomq("worker", "--help")
    assert done.returncode == 0
    for needle in ("--concurrency", "(default: 10)", "(default: 100)", "(default: 30.0)",
                   "--burst", "--log-format", "--verbose"):
        assert needle in done.stdout, needle


@pytest.mark.slow
def test_burst_drains_what_is_due_logs_each_job_and_exits_zero(tmp_path, url, raw, queue):
    (tmp_path / "app_mod.py").write_text(APP.format(q=queue))
    ids = []
    for args in (["ok", "1"], ["ok", "2"], ["bad"]):
        done = echomq("enqueue", *args, "--app", "app_mod:app", url=url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.split()[0])
    later = echomq("schedule", "ok", "3", "--in", "1h", "--app", "app_mod:app", url=url,
                   cwd=tmp_path).stdout.split()[0]
    t0 = time.monotonic()
    done = echomq("worker", "app_mod:app", "--burst", "-v", "--log-format", "json", url=url,
                  cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - t0 < 30
    records = [json.loads(line) for line in done.stderr.splitlines()]
    messages = [r["message"] for r in records]
    start = next(m for m in messages if m.startswith("worker "))
    parts = urlsplit(url)
    assert f"{parts.hostname}:{parts.port}" in start and f"{queue}-a, {queue}-b" in start
    assert "concurrency 10 per queue" in start
    assert parts.password and parts.password not in done.stderr
    for jid in ids[:2]:
        (mine,) = [m for m in messages if m.startswith(f"job {jid} ") and m.endswith(" ms)")]
        assert "ok: completed (" in mine
    # a failure is one record: a line naming the task, its runs and the run time, then
    # its traceback (issue 32), kept whole in the one JSON object
    (dead,) = [r for r in records if r["message"].startswith(f"job {ids[2]} ")]
    assert dead["level"] == "ERROR"
    first, traceback = dead["message"].split("\n", 1)
    assert first.startswith(
        f"job {ids[2]} bad: dead after 1 run (1 failure): ValueError: bad input 42 (")
    assert first.endswith(" ms)")
    assert traceback.startswith("Traceback (most recent call last):")
    assert "in bad" in traceback and traceback.endswith("ValueError: bad input 42")
    assert any(m.startswith("burst: nothing left to run") for m in messages)
    assert raw.zscore(keyspace.queue_key(f"{queue}-a", "schedule"), later) is not None
    assert raw.zcard(keyspace.queue_key(f"{queue}-a", "pending")) == 0


@pytest.mark.slow
def test_log_level_after_the_subcommand(tmp_path, url, queue):
    (tmp_path / "app_mod.py").write_text(APP.format(q=queue))
    done = echomq("worker", "app_mod:app", "--burst", "--log-level", "warning", url=url,
                  cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert " INFO " not in done.stderr
    quiet = echomq("worker", "app_mod:app", "--burst", url=url, cwd=tmp_path, timeout=60)
    assert " INFO echomq.worker: worker " in quiet.stderr  # INFO is the worker's default
