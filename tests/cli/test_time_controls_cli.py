"""Time controls from the command line, each command a subprocess (exit code, stdout,
stderr, no traceback): ``echomq why``, ``echomq pause QUEUE --until T``, ``echomq group pause
--until``, ``echomq job``/``stats`` showing deadlines and expired jobs, and ``echomq repeat
add`` (steering options), ``next`` (exclusions), ``run``, ``backfill``, ``pause --until``."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import time

import pytest

from echomq.core import ids, keyspace
from echomq.verbs import groups, jobs, registry, repeat
from tests.support.clients import server_ms

pytestmark = pytest.mark.slow  # subprocesses


def echomq(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "echomq.cli", *args, "--url", url],
                          capture_output=True, text=True, timeout=60)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def test_why_names_the_control(url, conn, queue):
    later, held, running = ids.mint(), ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, running, b"x")
    jobs.claim(conn, queue, 60_000)
    jobs.enqueue_in(conn, queue, later, b"x", 30_000)
    out = ok(echomq("why", later, url=url))
    assert out.startswith(f"{later} scheduled for ")
    assert re.search(r"\(in (2\d|30)\.\d s\)$", out.strip()), out
    jobs.pause(conn, queue)
    jobs.enqueue(conn, queue, held, b"x")
    assert ok(echomq("why", held, "--queue", queue, url=url)).strip() == (
        f"{held} queue paused (until resumed)")
    assert "running (its lease runs" in ok(echomq("why", running, url=url))
    got = json.loads(ok(echomq("why", held, "--json", url=url)))
    assert got["control"] == "paused" and got["state"] == "pending" and got["queue"] == queue


def test_why_of_an_unknown_or_foreign_id(url, queue):
    missing = echomq("why", ids.mint(), "--queue", queue, url=url)
    assert missing.returncode == 1 and "no job" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = echomq("why", "nope", url=url)
    assert bad.returncode == 2 and "not a job id" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_pause_until_a_duration_resumes_by_itself(url, conn, queue):
    registry.add(conn, [queue])  # a queue some producer used (an unknown name is refused)
    out = ok(echomq("pause", queue, "--until", "1s", url=url))
    assert out.startswith(f"{queue} paused until ")
    assert jobs.is_paused(conn, queue)
    until = jobs.paused_until(conn, queue)
    assert until is not None and 0 < until - server_ms(conn.client) <= 1_000
    time.sleep(1.1)
    assert not jobs.is_paused(conn, queue)


def test_pause_until_an_instant_and_a_bad_one(url, conn, queue):
    registry.add(conn, [queue])
    at = dt.datetime.fromtimestamp(server_ms(conn.client) / 1000 + 3600, dt.UTC)
    ok(echomq("pause", queue, "--until", at.isoformat(), url=url))
    assert jobs.paused_until(conn, queue) == int(at.timestamp() * 1000)
    bad = echomq("pause", queue, "--until", "tomorrowish", url=url)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_group_pause_until(url, conn, queue):
    out = ok(echomq("group", "pause", queue, "g", "--until", "10m", url=url))
    assert out.startswith(f"group g on {queue} paused until ")
    st = groups.stats(conn, queue)["g"]
    assert st.paused and st.paused_until is not None


def test_job_and_stats_show_deadlines_and_expired_jobs(url, conn, queue):
    alive, late = ids.mint(), ids.mint()
    jobs.admit(conn, queue, alive, b"x", mode="in", value=60_000, expires_ms=120_000)
    jobs.admit(conn, queue, late, b"x", expires_ms=10)
    out = ok(echomq("job", alive, url=url))
    assert "deadline " in out and "waiting   scheduled for " in out
    time.sleep(0.03)
    jobs.claim(conn, queue, 1000)
    out = ok(echomq("job", late, url=url))
    assert "state     expired" in out and "expired " in out
    table = ok(echomq("stats", "--queue", queue, url=url)).splitlines()
    assert f"{queue}: 1 expired (not started by their deadline" in "\n".join(table)
    counts = json.loads(ok(echomq("stats", "--queue", queue, "--json", url=url)))
    assert counts[queue]["expired"] == 1
    assert keyspace.validate_queue(queue)


def test_repeat_add_with_steering_options_and_next(url, conn, queue):
    out = ok(echomq("repeat", "add", "--queue", queue, "daily", "--cron", "0 9 * * *",
                    "--payload", "p", "--overlap", "buffer_all", "--jitter", "30s",
                    "--exclude", "2030-12-25", "--exclude", "* * * * 0", url=url))
    assert out.strip() == "registered"
    entry = repeat.get(conn, queue, "daily")
    assert entry.overlap == "buffer_all" and entry.jitter_ms == 30_000
    assert entry.exclude == ["2030-12-25", "* * * * 0"]
    lines = ok(echomq("repeat", "next", "--queue", queue, "daily", "--count", "8",
                      url=url)).splitlines()
    passed = sum(line.endswith("  excluded") for line in lines)  # the Sundays among them
    assert passed in (1, 2) and len(lines) == 8 + passed  # 8 runs that fire
    bad = echomq("repeat", "add", "--queue", queue, "x", "--every", "1m", "--payload", "p",
                 "--exclude", "someday", url=url)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_repeat_run_and_backfill(url, conn, queue):
    repeat.upsert(conn, queue, "r", template=b"p", every_ms=60_000)
    out = ok(echomq("repeat", "run", "--queue", queue, "r", url=url))
    job_id, word, q = out.split()
    assert word == "enqueued" and q == queue and jobs.get(conn, queue, job_id) is not None
    nxt = repeat.get(conn, queue, "r").next_at
    start = dt.datetime.fromtimestamp((nxt - 3 * 60_000) / 1000, dt.UTC).isoformat()
    end = dt.datetime.fromtimestamp(nxt / 1000, dt.UTC).isoformat()
    first = ok(echomq("repeat", "backfill", "--queue", queue, "r", "--from", start, "--to",
                      end, url=url))
    assert first.splitlines()[-1].startswith("3 fired")
    again = ok(echomq("repeat", "backfill", "--queue", queue, "r", "--from", start, "--to",
                      end, url=url))
    assert again.strip().startswith("0 fired")
    missing = echomq("repeat", "run", "--queue", queue, "nope", url=url)
    assert missing.returncode == 1 and "no registration" in missing.stderr


def test_repeat_pause_until(url, conn, queue):
    repeat.upsert(conn, queue, "r", template=b"p", every_ms=60_000)
    out = ok(echomq("repeat", "pause", "--queue", queue, "r", "--until", "5m", url=url))
    assert out.startswith("paused until ")
    entry = repeat.get(conn, queue, "r")
    assert entry.paused and entry.paused_until is not None
