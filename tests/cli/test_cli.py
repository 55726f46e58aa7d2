"""The runtime's CLI: enqueue, schedule --in/--at, job, stats, dead list|retry, --url and
ECHOMQ_URL, worker argument errors, and the demo tour end to end."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from echomq.cli.main import main
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.core.times import parse_duration, parse_instant
from echomq.verbs import jobs
from tests.support.clients import server_ms


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def out_of(capsys) -> str:
    return capsys.readouterr().out


def test_parse_duration_and_instant():
    assert [parse_duration(t) for t in ("5s", "250ms", "2m", "1.5h", "1d")] == [
        5000, 250, 120_000, 5_400_000, 86_400_000]
    assert parse_instant("2030-01-01T00:00:00Z") == 1_893_456_000_000
    assert parse_instant("1893456000000") == 1_893_456_000_000
    for bad in ("soon", "5 parsecs", "-3s", "40"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_duration(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_instant("tomorrow-ish")


@pytest.mark.slow
@pytest.mark.topologies
def test_enqueue_writes_the_task_payload(url, raw, queue, capsys):
    assert main(["enqueue", "mail.send", "3", "ada@example.com", "--kwargs", '{"urgent": true}',
                 "--queue", queue, "--url", url]) == 0
    job_id, outcome, q = out_of(capsys).split()
    assert (outcome, q) == ("enqueued", queue)
    assert raw.hget(keyspace.job_key(queue, job_id), "payload") == encode(
        "mail.send", [3, "ada@example.com"], {"urgent": True})
    assert raw.zscore(k(queue, "pending"), job_id) == 0


def test_env_url_and_duplicate_id(url, raw, queue, capsys, monkeypatch):
    monkeypatch.setenv("ECHOMQ_URL", url)
    jid = ids.mint()
    assert main(["enqueue", "t", "--queue", queue, "--id", jid]) == 0
    assert main(["enqueue", "t", "--queue", queue, "--id", jid]) == 1
    assert out_of(capsys).splitlines()[-1] == f"{jid} duplicate {queue}"


def test_unserializable_kwargs_refused(url, queue, snap):
    assert main(["enqueue", "t", "--kwargs", "[1, 2]", "--queue", queue, "--url", url]) == 2
    assert snap(queue) == {}


@pytest.mark.topologies
def test_schedule_in_and_at(url, raw, queue, capsys):
    before = server_ms(raw)
    assert main(["schedule", "report", "--in", "5s", "--queue", queue, "--url", url]) == 0
    after = server_ms(raw)
    in_id, outcome, _ = out_of(capsys).split()
    assert outcome == "scheduled"
    assert before + 5000 <= raw.zscore(k(queue, "schedule"), in_id) <= after + 5000
    assert main(["schedule", "report", "--at", "2030-01-01T00:00:00Z", "--queue", queue,
                 "--url", url]) == 0
    at_id = out_of(capsys).split()[0]
    assert raw.zscore(k(queue, "schedule"), at_id) == 1_893_456_000_000
    assert main(["job", at_id, "--queue", queue, "--url", url]) == 0
    shown = out_of(capsys)
    assert "state     scheduled" in shown and "2030-01-01T00:00:00+00:00" in shown
    assert main(["job", ids.mint(), "--queue", queue, "--url", url]) == 1


def test_schedule_needs_a_time(url, queue):
    with pytest.raises(SystemExit):
        main(["schedule", "report", "--queue", queue, "--url", url])


@pytest.mark.topologies
def test_stats_counts_per_state(url, conn, queue, capsys):
    jobs.enqueue(conn, queue, ids.mint(), b"p")
    jobs.enqueue(conn, queue, ids.mint(), b"p")
    jobs.enqueue_in(conn, queue, ids.mint(), b"p", 60_000)
    jobs.claim(conn, queue, 60_000)
    assert main(["stats", "--queue", queue, "--json", "--url", url]) == 0
    table = json.loads(out_of(capsys))
    assert table == {queue: {"pending": 1, "scheduled": 1, "active": 1, "dead": 0,
                             "completed": 0, "cancelled": 0}}
    assert main(["stats", "--url", url]) == 0  # discovers queues by scanning
    lines = out_of(capsys).splitlines()
    assert lines[0].split() == ["queue", *jobs.STATE_SETS, "status"]
    mine = next(line for line in lines if line.startswith(queue))
    assert mine.split()[1:] == ["1", "1", "1", "0", "0", "0", "running"]


@pytest.mark.topologies
def test_dead_list_and_retry(url, conn, raw, queue, capsys):
    dead_ids = []
    for n in range(3):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, encode("t", [n]))
        c = jobs.claim(conn, queue, 10_000)
        assert jobs.retry(conn, queue, c.id, c.token, 0, 1, f"boom {n}") == "dead"
        dead_ids.append(jid)
    assert main(["dead", "list", "--queue", queue, "--url", url]) == 0
    lines = out_of(capsys).splitlines()
    assert len(lines) == 3 and all("  1 run (1 failure)  boom" in line for line in lines)
    assert {line.split()[0] for line in lines} == set(dead_ids)
    assert main(["dead", "list", "--queue", queue, "--json", "--url", url]) == 0
    rows = [json.loads(line) for line in out_of(capsys).splitlines()]
    assert {r["error"] for r in rows} == {"boom 0", "boom 1", "boom 2"}

    assert main(["dead", "retry", dead_ids[0], "--queue", queue, "--url", url]) == 0
    row = raw.hgetall(keyspace.job_key(queue, dead_ids[0]))
    assert (row[b"state"], row[b"attempts"]) == (b"pending", b"0")
    assert raw.zscore(k(queue, "pending"), dead_ids[0]) == 0
    assert raw.zscore(k(queue, "dead"), dead_ids[0]) is None
    # a job that is not dead is refused with the server's text, nothing written
    assert main(["dead", "retry", dead_ids[0], "--queue", queue, "--url", url]) == 1
    assert f"{dead_ids[0]} is not dead" in capsys.readouterr().err

    assert main(["dead", "retry", "--all", "--queue", queue, "--url", url]) == 0
    assert "revived 2 jobs" in out_of(capsys)
    assert raw.zcard(k(queue, "dead")) == 0 and raw.zcard(k(queue, "pending")) == 3


def test_worker_refuses_a_bad_app_spec(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notapp.py").write_text("app = 42\n")
    with pytest.raises(SystemExit, match=r"is not an echomq\.App"):
        main(["worker", "notapp:app", "--url", url])
    with pytest.raises(SystemExit, match="cannot import"):
        main(["worker", "missing_mod:app", "--url", url])


@pytest.mark.slow
def test_demo_tours_the_lifecycle_and_exits_zero():
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
    done = subprocess.run([sys.executable, "-m", "echomq.cli", "demo"], capture_output=True,
                          timeout=60, env=env)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    for needle in ("queued", "start", "completed", "retry", "next run in 250 ms",
                   "next run in 500 ms", "DEAD", "delayed", "state=dead attempts=4"):
        assert needle in out, needle
    assert out.index("DEAD") > out.index("next run in 1000 ms")
