"""``echomq jobs QUEUE [--state S] [--limit N] [--json]`` (issue 32), as a user runs it."""

from __future__ import annotations

import json

from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs, registry
from tests.support.cli import echomq


def test_jobs_lists_a_queue_by_state_with_a_limit_and_json(conn, url, queue):
    registry.add(conn, [queue])
    waiting = [ids.mint() for _ in range(3)]
    for jid in waiting:
        jobs.enqueue(conn, queue, jid, encode("t", []))
    later = ids.mint()
    jobs.enqueue_in(conn, queue, later, encode("t", []), 60_000)
    done = echomq("jobs", queue, url=url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["id", "state", "runs", "task"]
    assert [line.split()[:2] for line in lines[1:]] == (
        [[j, "pending"] for j in waiting] + [[later, "scheduled"]])
    assert {line.split()[3] for line in lines[1:]} == {"t"}  # the task column (issue 32)
    got = json.loads(echomq("jobs", queue, "--state", "pending", "--limit", "2", "--json",
                            url=url).stdout)
    assert [r["id"] for r in got] == waiting[:2] and {r["state"] for r in got} == {"pending"}
    assert {r["task"] for r in got} == {"t"}
    empty = echomq("jobs", queue, "--state", "dead", url=url)
    assert empty.returncode == 0 and "no dead jobs" in empty.stdout


def test_jobs_refuses_a_bad_state_limit_or_unknown_queue(url, queue):
    for argv in (["--state", "finished"], ["--limit", "0"]):
        done = echomq("jobs", queue, *argv, url=url)
        assert done.returncode == 2 and "Traceback" not in done.stderr
    done = echomq("jobs", f"{queue}-never", url=url)
    assert done.returncode == 2 and "is known" in done.stderr
    assert "Traceback" not in done.stderr


def test_job_prints_its_dashboard_page_while_a_dashboard_runs(conn, url, queue, tmp_path):
    from echomq.embedded.launch import free_port
    from tests.support.cli import kill_all, popen
    from tests.support.polling import wait_for

    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("t", []))
    registry.add(conn, [queue])
    assert "page " not in echomq("job", jid, url=url).stdout
    port = free_port()
    proc = popen("dashboard", "--port", str(port), url=url, cwd=tmp_path)
    try:
        assert proc.stdout is not None and b"dashboard" in proc.stdout.readline()
        page = f"page      http://127.0.0.1:{port}/job/{jid}"
        wait_for(lambda: page in echomq("job", jid, url=url).stdout, 10, "the page line")
        proc.terminate()  # a dashboard that stops takes its announcement back
        proc.wait(10)
        wait_for(lambda: "page " not in echomq("job", jid, url=url).stdout, 10, "no page")
    finally:
        kill_all([proc])


def test_job_names_the_task_and_runs_of_a_job_kept_only_for_its_result(conn, url, queue):
    """Issue 32: its row deleted at the ack, its result kept: ``echomq job`` still says
    which task ran and how many times (the ack kept them beside the result)."""
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("shop.total", [3]))
    registry.add(conn, [queue])
    claim = jobs.claim(conn, queue, 30_000)
    assert claim is not None
    jobs.ack(conn, queue, jid, claim.token, False, result="90", keep_result_ms=60_000)
    done = echomq("job", jid, "--json", url=url)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["state"], got["task"], got["attempts"]) == ("completed", "shop.total", 1)
    text = echomq("job", jid, url=url).stdout
    assert "task      shop.total" in text and "runs      1" in text, text
