"""Every reader shows what another client (or a bug) left in a queue instead of raising:
rows the queue cannot run (they end dead with the reason: tests/verbs/test_corrupt_rows.py)
and hostile scores. The readers: ``app.job``, ``echomq job``, ``echomq stats``, ``echomq dead
list``, the dashboard's pages and ``/metrics``."""

from __future__ import annotations

import json

import pytest

from echomq import ids, keyspace
from echomq.verbs import jobs
from tests.support.cli import echomq


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def ok(done) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    return done.stdout


# -- 1. rows the queue cannot run --------------------------------------------------------

def test_a_corrupt_row_shows_dead_with_its_reason_everywhere(app, conn, raw, queue, url,
                                                             board):
    jid = ids.mint()
    raw.hset(keyspace.job_key(queue, jid), mapping={"state": "pending", "attempts": "0"})
    raw.zadd(k(queue, "pending"), {jid: 0})
    assert jobs.claim(conn, queue, 1000) is None

    info = app.job(jid, queue=queue)
    assert info.state == "dead" and info.error == "corrupt row: no payload"
    out = ok(echomq("job", jid, "--queue", queue, url=url))
    assert "dead" in out and "corrupt row: no payload" in out
    out = ok(echomq("dead", "list", "--queue", queue, url=url))
    assert jid in out and "corrupt row: no payload" in out
    out = ok(echomq("stats", "--queue", queue, url=url))
    assert f"{queue}: 1 corrupt row ended dead" in out
    got = json.loads(ok(echomq("stats", "--queue", queue, "--json", url=url)))
    assert got[queue]["corrupt"] == 1

    code, page = board.get("/")
    assert code == 200 and "<span>corrupt</span><b>1</b>" in page
    code, page = board.get(f"/q/{queue}?state=dead")
    assert code == 200 and jid in page and "corrupt row: no payload" in page
    code, text = board.get("/metrics")
    assert code == 200 and f'echomq_jobs_corrupt_total{{queue="{queue}"}} 1' in text


GARBLED = {"attempts": "many", "failures": "x", "stalled": "1e999", "delays": "-",
           "priority": "high", "died_at": "yesterday", "completed_at": "inf",
           "progress": "{not json", "payload": b"\xff\xfe not json"}


def test_garbled_fields_are_shown_not_raised(app, conn, raw, queue, url, board):
    jid = ids.mint()
    raw.hset(keyspace.job_key(queue, jid), mapping={"state": "dead", **GARBLED})
    raw.zadd(k(queue, "dead"), {jid: 1})

    info = app.job(jid, queue=queue)
    assert info.state == "dead" and info.attempts == 0 and info.task is None
    assert "attempts 'many' is not a number" in info.notes
    out = ok(echomq("job", jid, "--queue", queue, url=url))
    assert "attempts 'many' is not a number" in out
    ok(echomq("dead", "list", "--queue", queue, url=url))
    ok(echomq("dead", "list", "--queue", queue, "--json", url=url))
    for path in ("/", f"/q/{queue}?state=dead", f"/q/{queue}/job/{jid}", "/metrics",
                 f"/api/q/{queue}"):
        code, _ = board.get(path)
        assert code == 200, path


def test_a_row_that_is_not_a_hash_is_shown_not_raised(app, raw, queue, url, board):
    jid = ids.mint()
    raw.set(keyspace.job_key(queue, jid), "not a row")
    raw.zadd(k(queue, "dead"), {jid: 1})
    info = app.job(jid, queue=queue)
    assert info.state == "?"
    assert any("the row is a string, not a hash" in n for n in info.notes)
    out = ok(echomq("job", jid, "--queue", queue, url=url))
    assert "the row is a string, not a hash" in out
    ok(echomq("dead", "list", "--queue", queue, url=url))
    for path in ("/", f"/q/{queue}?state=dead", f"/q/{queue}/job/{jid}", "/metrics"):
        code, _ = board.get(path)
        assert code == 200, path


# -- 2. hostile scores ----------------------------------------------------------------------

HOSTILE = ["inf", "1e300", "-inf", "-1e300"]


@pytest.mark.parametrize("score", HOSTILE)
def test_a_hostile_score_is_shown_by_every_reader(app, conn, raw, queue, url, board, score):
    # one job of each state scored `score` by another client
    made = {}
    for state, key in (("scheduled", "schedule"), ("active", "active"), ("dead", "dead"),
                       ("completed", "completed"), ("cancelled", "cancelled"),
                       ("pending", "pending")):
        jid = ids.mint()
        raw.hset(keyspace.job_key(queue, jid), mapping={
            "state": state, "attempts": "1", "payload": b'{"args":[],"kwargs":{},"task":"t"}',
            "died_at": score, "completed_at": score})
        raw.zadd(k(queue, key), {jid: float(score)})
        made[state] = jid
    jid = made["scheduled"]
    info = app.job(jid, queue=queue)
    assert info.state == "scheduled" and info.run_at is not None
    assert any("run-at score" in n for n in info.notes)
    out = ok(echomq("job", jid, "--queue", queue, url=url))
    assert "run at" in out and "no time within years 1..9999" in out
    ok(echomq("stats", "--queue", queue, url=url))
    ok(echomq("dead", "list", "--queue", queue, url=url))
    ok(echomq("dead", "list", "--queue", queue, "--json", url=url))
    paths = ["/", "/metrics", f"/api/q/{queue}", "/api/queues", f"/q/{queue}/clock",
             *(f"/q/{queue}?state={s}" for s in made),
             *(f"/q/{queue}/job/{j}" for j in made.values())]
    for path in paths:
        code, _ = board.get(path)
        assert code == 200, path


@pytest.mark.slow
def test_a_worker_runs_its_jobs_beside_hostile_scores(tmp_path, conn, raw, queue, url):
    from tests.support.cli import popen
    from tests.support.polling import wait_for

    for score in ("-inf", "inf", "1e300"):
        raw.zadd(k(queue, "schedule"), {ids.mint(): float(score)})
    (tmp_path / "hostile_app.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.task(queue='{queue}')\ndef ping(n):\n    return n\n")
    proc = popen("worker", "hostile_app:app", url=url, cwd=tmp_path)
    try:
        for n in range(5):
            jobs.enqueue(conn, queue, ids.mint(), f'{{"args":[{n}],"kwargs":{{}},'
                         f'"task":"hostile_app.ping"}}'.encode())
        wait_for(lambda: jobs.stats(conn, queue)["completed"] >= 5, 20, "five jobs run")
        assert proc.poll() is None  # still serving
    finally:
        proc.terminate()
        proc.wait(10)
