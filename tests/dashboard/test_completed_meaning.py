"""One meaning of "completed" (issue 32): ``echomq stats`` and the dashboard both count
every completion from the server's counters and label the kept rows apart."""

from __future__ import annotations

from echomq import dashboard
from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs, registry
from tests.support.board import Client
from tests.support.cli import echomq


def test_stats_and_the_overview_say_which_completed_they_count(conn, url, queue):
    registry.add(conn, [queue])
    for _ in range(2):  # completed under the default retention: counted, not kept
        jobs.enqueue(conn, queue, ids.mint(), encode("t", []))
        c = jobs.claim(conn, queue, 10_000)
        jobs.ack(conn, queue, c.id, c.token)
    done = echomq("stats", "--queue", queue, url=url)
    assert done.returncode == 0, done.stderr
    assert "completed: every job completed, kept or not" in done.stdout
    httpd = dashboard.serve(conn, port=0, queues=[queue])
    try:
        code, page = Client(httpd.server_address[1]).get("/")
    finally:
        httpd.shutdown()
    assert code == 200
    assert "<th class='n'>Completed (kept)</th>" in page
    assert "<span>completed (all)</span><b>2</b>" in page
