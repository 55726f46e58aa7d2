"""The operating commands, run as an operator runs them (``echomq`` subprocesses): ``workers``
(table, ``--json``, ``--busy``, ``inspect``, ``quiet``/``stop``), ``health`` (its exit code
for each case), ``purge`` (refused without ``--yes``, writing nothing), the enqueue check
(a typo'd task is refused, ``--force`` sends it), ``job --json``, ``dead list``'s task
column, ``stats``' counters, a pipe into ``head`` and a wrong password."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import App
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import jobs, workers
from tests.support.cli import ECHOMQ, echomq
from tests.support.polling import wait_for
from tests.support.workers import serving

pytestmark = pytest.mark.slow  # subprocesses


def dead_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr, done.stderr


@pytest.fixture
def ops_app(url, queue) -> Iterator[tuple[App, Any]]:
    app = App(url, keep_completed=100)  # completed rows kept: `job --json` shows their call

    @app.task(queue=queue, name="send_email")
    def send_email(to):
        time.sleep(0.01)
        return f"sent to {to}"

    @app.task(queue=queue, name="report", keep_result=60, max_attempts=2, retry_delay_ms=10)
    def report(month, *, fmt="pdf"):
        if fmt == "bad":
            raise ValueError("no such format")
        return {"month": month, "fmt": fmt}

    @app.task(queue=queue, name="slow")
    def slow(gate):
        while not app.connector().call("EXISTS", gate):
            time.sleep(0.02)

    yield app, app.connector()
    app.close()


def _mine(url: str, worker: Any) -> dict[str, Any]:
    done = echomq("workers", "--json", url=url)
    assert done.returncode == 0, done.stderr
    return next(w for w in json.loads(done.stdout) if w["id"] == worker.id)


def test_workers_lists_and_inspects_the_live_ones(ops_app, url, queue):
    app, conn = ops_app
    gate = f"{queue}:gate"
    with serving(app, [queue], concurrency=3, heartbeat_ms=500) as worker:
        jid = app.tasks["slow"].enqueue(gate)
        wait_for(lambda: any(r.id == jid for w in workers.live(conn) for r in w.busy), 10,
                 "the busy list")
        mine = _mine(url, worker)
        assert {"id", "host", "pid", "queues", "concurrency", "busy"} <= set(mine)
        assert mine["queues"] == [queue] and mine["concurrency"] == 3
        assert mine["busy"][0]["id"] == jid and mine["busy"][0]["task"] == "slow"
        assert mine["busy"][0]["queue"] == queue and mine["state"] == "running"
        table = echomq("workers", url=url)
        assert table.returncode == 0
        header, *rows = table.stdout.splitlines()
        assert header.split()[:5] == ["ID", "HOST", "PID", "APP", "QUEUES"]
        row = next(r for r in rows if r.startswith(worker.id))
        assert " 1/3 " in row and queue in row and "ago" in row
        for busy in (echomq("workers", "--busy", url=url), echomq("inspect", url=url)):
            assert busy.returncode == 0, busy.stderr
            line = next(ln for ln in busy.stdout.splitlines() if jid in ln)
            assert line.split()[:4] == [worker.id, jid, queue, "slow"]
        for args in (("inspect", "--json"), ("workers", "--busy", "--json")):
            as_json = json.loads(echomq(*args, url=url).stdout)  # one object per worker
            (mine,) = [w for w in as_json if w["id"] == worker.id]
            (running,) = mine["busy"]
            assert running["id"] == jid and running["attempt"] == 1
            assert running["runtime_s"] >= 0
        conn.call("SET", gate, "1")


def test_quiet_and_stop_from_the_command_line(ops_app, url, queue):
    app, conn = ops_app
    with serving(app, [queue], heartbeat_ms=500) as worker:
        done = echomq("workers", "quiet", worker.id, url=url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{worker.id}: asked to quiet (no new claims; running " \
                                      "jobs finish)"
        wait_for(lambda: _mine(url, worker)["state"] == "quiet", 5, "quiet")
        ghost = echomq("workers", "stop", "nohost:1:abc", url=url)
        assert ghost.returncode == 1 and "no live worker 'nohost:1:abc'" in ghost.stderr
        no_traceback(ghost)
        neither = echomq("workers", "stop", url=url)
        assert neither.returncode == 2 and "--all" in neither.stderr
        stop = echomq("workers", "stop", worker.id, url=url)
        assert stop.returncode == 0
        wait_for(lambda: worker.unfinished == 0 and not any(
            w.id == worker.id for w in workers.live(conn)), 10, "stopped and gone")


def test_health_exit_codes(ops_app, url, queue, conn):
    app, _ = ops_app
    down = echomq("health", url=f"valkey://127.0.0.1:{dead_port()}/0", timeout=30)
    assert down.returncode == 1
    assert down.stderr.startswith("unhealthy: server unreachable") and len(
        down.stderr.strip().splitlines()) == 1
    no_traceback(down)
    nobody = echomq("health", "--queue", queue, url=url)
    assert nobody.returncode == 1
    assert nobody.stderr.strip() == f"unhealthy: no live worker for queue {queue!r}"
    elsewhere = echomq("health", "--local", "--queue", queue, url=url)
    assert elsewhere.returncode == 1 and "on this host" in elsewhere.stderr
    with serving(app, [queue], heartbeat_ms=500):
        ok = echomq("health", "--queue", queue, "--max-lag", "30s", url=url)
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.startswith("healthy: ") and queue in ok.stdout
        here = echomq("health", "--local", "--queue", queue, url=url)  # a pod's liveness
        assert here.returncode == 0, here.stderr
        # a due job nobody claims (the queue is paused) waits past the bound
        jobs.pause(conn, queue)
        jobs.enqueue(conn, queue, ids.mint_at(int(time.time() * 1000) - 5_000),
                     encode("send_email", ["a@b.c"]))
        late = echomq("health", "--queue", queue, "--max-lag", "2s", url=url)
        assert late.returncode == 1
        assert late.stderr.startswith(f"unhealthy: oldest due job on queue {queue!r} has "
                                      "waited ")
        assert "over --max-lag 2 s" in late.stderr
        assert echomq("health", "--queue", queue, url=url).returncode == 0  # no bound: fine
        jobs.resume(conn, queue)


def test_purge_needs_yes_and_writes_nothing_without_it(url, conn, queue, snap):
    for _ in range(3):
        jobs.enqueue(conn, queue, ids.mint(), b"x")
    jobs.enqueue_in(conn, queue, ids.mint(), b"x", 60_000)
    before = snap(queue)
    refused = echomq("purge", queue, "--state", "pending", url=url)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert "nothing was deleted" in refused.stderr
    assert snap(queue) == before
    bad = echomq("purge", queue, "--state", "active", "--yes", url=url)
    assert bad.returncode == 2 and snap(queue) == before
    done = echomq("purge", queue, "--state", "pending", "--yes", url=url)
    assert done.returncode == 0 and done.stdout.strip() == f"purged 3 pending jobs from {queue}"
    counts = jobs.counts(conn, queue)
    assert counts["pending"] == 0 and counts["scheduled"] == 1


def test_a_typo_task_is_refused_with_the_known_ones(ops_app, url, queue, raw):
    app, conn = ops_app

    def jobs_of() -> list[bytes]:  # the worker writes its metrics beside; jobs are these
        return sorted(raw.scan_iter(match=keyspace.job_key(queue, "*")))

    with serving(app, [queue], heartbeat_ms=500):
        before = (jobs_of(), jobs.counts(conn, queue))
        typo = echomq("enqueue", "send_emial", "a@b.c", "--queue", queue, url=url)
        assert typo.returncode == 2
        first, *rest = typo.stderr.strip().splitlines()
        assert first.startswith(f"echomq: unknown task 'send_emial' on queue {queue!r}")
        assert "did you mean 'send_email'?" in first and "--force" in first
        assert [ln.strip() for ln in rest[1:]] == ["report", "send_email", "slow"]
        no_traceback(typo)
        assert (jobs_of(), jobs.counts(conn, queue)) == before  # nothing written
        good = echomq("enqueue", "send_email", "a@b.c", "--queue", queue, url=url)
        assert good.returncode == 0 and "enqueued" in good.stdout
    # the declarations outlive the worker: still refused with no worker running
    again = echomq("enqueue", "send_emial", "--queue", queue, url=url)
    assert again.returncode == 2
    forced = echomq("enqueue", "send_emial", "--queue", queue, "--force", url=url)
    assert forced.returncode == 0 and "enqueued" in forced.stdout
    # a queue nobody ever declared tasks on is not checked (as before)
    fresh = echomq("enqueue", "anything", "--queue", queue + "x", url=url)
    assert fresh.returncode == 0


def test_job_json_dead_list_task_and_stats_counters(ops_app, url, queue):
    app, conn = ops_app
    with serving(app, [queue], heartbeat_ms=500):
        ok = app.tasks["report"].enqueue("2030-01", fmt="csv")
        bad = app.tasks["report"].enqueue("2030-02", fmt="bad")
        for i in range(3):
            app.tasks["send_email"].enqueue(f"u{i}@x")
        wait_for(lambda: jobs.counts(conn, queue)["dead"] == 1 and sum(
            jobs.counts(conn, queue)[s] for s in ("pending", "scheduled", "active")) == 0,
            10, "all settled")
    done = echomq("job", ok, "--json", url=url)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["task"], got["args"], got["kwargs"]) == ("report", ["2030-01"], {"fmt": "csv"})
    assert got["state"] == "completed" and got["result"] == {"month": "2030-01", "fmt": "csv"}
    failed = json.loads(echomq("job", bad, "--json", url=url).stdout)
    assert failed["state"] == "dead" and failed["error"] == "ValueError: no such format"
    assert failed["attempts"] == 2 and failed["history"]["failures"] == 2
    assert failed["history"]["died_at_ms"] is not None
    listed = echomq("dead", "list", "--queue", queue, url=url)
    assert listed.stdout.split()[:3] == [bad, queue, "report"]
    row = json.loads(echomq("dead", "list", "--queue", queue, "--json", url=url).stdout)
    assert row["task"] == "report"
    stats = echomq("stats", "--queue", queue, url=url)
    header, line, *extra = stats.stdout.splitlines()
    cols = dict(zip(header.split(), line.split(), strict=True))
    assert cols["completed"] == "4"  # none kept, all counted
    assert any(e.startswith(f"{queue}: 4 completed and 2 failed attempts in all") for e in extra)
    assert "last minute: 4 completed, 2 failed" in stats.stdout
    table = json.loads(echomq("stats", "--queue", queue, "--json", url=url).stdout)
    assert table[queue]["completed"] == 4


def test_output_into_head_ends_quietly(url, raw, queue):
    pipe = raw.pipeline(transaction=False)
    for i in range(1500):  # more than a pipe buffer of lines
        jid = ids.mint()
        pipe.hset(keyspace.job_key(queue, jid), mapping={
            "state": "dead", "attempts": 1, "error": "boom " * 10,
            "payload": encode("t", [i])})
        pipe.zadd(keyspace.queue_key(queue, "dead"), {jid: 1_000 + i})
    pipe.execute()
    cmd = " ".join([*ECHOMQ, "dead", "list", "--queue", queue, "--limit", "2000", "--url",
                    f"'{url}'", "|", "head", "-1"])
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], capture_output=True,
                          text=True, timeout=60)
    assert len(done.stdout.splitlines()) == 1
    assert done.stderr == "", done.stderr
    assert done.returncode == 0


def test_a_wrong_password_says_so_and_how_to_fix_it(server):
    bad = server.url.replace(f":{server.password}@", ":not-the-password@")
    assert bad != server.url
    done = echomq("workers", url=bad)
    assert done.returncode == 1
    first, second = done.stderr.strip().splitlines()
    assert "refused the password" in first and "wrong password" in first
    assert "valkey://:PASSWORD@" in second and "echomq server status" in second
    assert "echomq server`" not in done.stderr  # not "start a server"
    assert "not-the-password" not in done.stderr
    no_traceback(done)
    health = echomq("health", url=bad)
    assert health.returncode == 1 and "refused the password" in health.stderr
