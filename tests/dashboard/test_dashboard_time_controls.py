"""The dashboard's time controls over real HTTP: the job page says what holds a waiting job
(the line ``echomq why`` prints) and shows a deadline and an expired end; the registrations
page previews exclusions and jitter, runs a registration now and backfills a range."""

from __future__ import annotations

import datetime as dt
import time

from echomq.core import ids
from echomq.verbs import jobs, repeat


def test_the_job_page_says_what_holds_a_job(board, conn, queue):
    jid = ids.mint()
    jobs.pause(conn, queue)
    jobs.admit(conn, queue, jid, b"x", expires_ms=3_600_000)
    code, page = board.get(f"/q/{queue}/job/{jid}")
    assert code == 200
    assert "waiting on" in page and "queue paused (until resumed); expires in 60 m" in page
    assert "deadline" in page


def test_an_expired_job_shows_its_end(board, conn, queue):
    jid = ids.mint()
    jobs.admit(conn, queue, jid, b"x", expires_ms=10)
    time.sleep(0.03)
    assert jobs.claim(conn, queue, 1_000) is None
    code, page = board.get(f"/q/{queue}/job/{jid}")
    assert code == 200 and "badge expired" in page and "waiting on" not in page
    assert board.get(f"/q/{queue}?state=expired")[0] == 200


def test_registrations_preview_and_steer(board, conn, queue):
    repeat.upsert(conn, queue, "daily", template=b"{}", cron="0 9 * * *", jitter_ms=60_000,
                  exclude=["* * * * 0"], overlap="buffer_all")
    page = board.get(f"/q/{queue}/repeat")[1]
    assert "excluded" in page and "overlap buffer_all" in page and "jitter 1m" in page
    assert board.post(f"/q/{queue}/repeat/daily/run") == 303
    assert jobs.counts(conn, queue)["pending"] == 1
    day = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = (day - dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    end = day.strftime("%Y-%m-%dT%H:%M")
    assert board.post(f"/q/{queue}/repeat/daily/backfill", {"from": start, "to": end}) == 303
    # three days at 09:00 (a Sunday among them excluded), each held behind the one before
    # (buffer_all: the run-now job is still waiting)
    fired = jobs.counts(conn, queue)["scheduled"]
    assert fired in (2, 3)
    assert board.post(f"/q/{queue}/repeat/daily/backfill", {"from": start, "to": end}) == 303
    assert jobs.counts(conn, queue)["scheduled"] == fired  # a second backfill: nothing new
