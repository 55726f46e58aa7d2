"""Durable steps on the operator's surfaces: ``echomq job`` lists the steps, ``echomq
signal`` resumes a waiting job, ``echomq purge --state waiting`` deletes parked ones, the
dashboard's job page shows the steps and ``/metrics`` counts waiting jobs."""

from __future__ import annotations

import json

from echomq.connectors.connector import Connector
from echomq.core import ids
from echomq.verbs import durable, jobs
from tests.support.board import Client
from tests.support.cli import echomq


def parked(conn: Connector, queue: str, key: str) -> str:
    """A job that recorded step ``fetch`` and waits for signal ``key``."""
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"p")
    claim = jobs.claim(conn, queue, 30_000)
    assert claim is not None and claim.id == jid
    durable.record(conn, queue, jid, claim.token, "fetch", b'{"n":1}')
    got = durable.wait_for(conn, queue, jid, claim.token, "approval", key, 60_000)
    assert got.step.state == "waiting"
    return jid


def test_job_lists_the_steps_and_signal_resumes(url: str, conn: Connector, queue: str
                                                ) -> None:
    key = f"ok:{queue}"
    jid = parked(conn, queue, key)
    shown = echomq("job", jid, url=url)
    assert shown.returncode == 0, shown.stderr
    lines = [ln for ln in shown.stdout.splitlines() if ". fetch" in ln or ". approval" in ln]
    assert "1. fetch  done" in lines[0] and "2. approval  waiting" in lines[1], shown.stdout
    as_json = json.loads(echomq("job", jid, "--json", url=url).stdout)
    assert [s["name"] for s in as_json["steps"]] == ["fetch", "approval"]
    sent = echomq("signal", key, "--payload", '{"ok": true}', url=url)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == f"{key}: 1 job resumed"
    row = jobs.get(conn, queue, jid)
    assert row["state"] == "pending"
    steps = durable.steps(conn, queue, jid)
    assert steps[1].state == "done" and json.loads(steps[1].result or b"") == {"ok": True}
    again = echomq("signal", key, "--json", url=url)  # kept for late waiters; none left
    assert json.loads(again.stdout) == {"key": key, "resumed": 0}
    bad = echomq("signal", key, "--payload", "{nope", url=url)
    assert bad.returncode == 2 and "not JSON" in bad.stderr


def test_purge_deletes_the_waiting_jobs(url: str, conn: Connector, queue: str) -> None:
    jid = parked(conn, queue, f"purge:{queue}")
    done = echomq("purge", queue, "--state", "waiting", "--yes", url=url)
    assert done.returncode == 0, done.stderr
    assert "purged 1 waiting" in done.stdout
    assert jobs.get(conn, queue, jid) is None
    assert jobs.counts(conn, queue).get("waiting", 0) == 0
    # off every wait index too: its signal's waiters and its timeout
    assert conn.call("SCARD", f"emq:{{{queue}}}:signal:purge:{queue}") == 0
    assert conn.call("ZSCORE", f"emq:{{{queue}}}:deadlines", jid) is None


def test_the_dashboard_shows_the_steps_and_metrics_count_waiting(
        board: Client, conn: Connector, queue: str) -> None:
    jid = parked(conn, queue, f"board:{queue}")
    status, page = board.get(f"/q/{queue}/job/{jid}")
    assert status == 200
    assert "<h2>Steps</h2>" in page and ">fetch<" in page and ">approval<" in page
    assert "step:fetch" not in page  # the journal's fields are the table, not raw facts
    status, metrics = board.get("/metrics")
    assert status == 200
    assert f'echomq_jobs{{queue="{queue}",state="waiting"}} 1' in metrics
