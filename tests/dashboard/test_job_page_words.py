"""The job page explains its fields (issue 32): ``notify`` and ``flow`` in words with
units, the retry policy read as a backoff, the worker holding an active job named; and
``/job/ID`` finds the job on any queue."""

from __future__ import annotations

import pytest

from echomq import App, dashboard
from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs, registry, workers
from tests.support.board import Client


@pytest.fixture
def board(conn):
    httpd = dashboard.serve(conn, port=0)
    yield Client(httpd.server_address[1])
    httpd.shutdown()


def test_job_anywhere_redirects_to_its_queue_and_404s_an_unknown_id(conn, board, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("t", []))
    registry.add(conn, [queue])
    code, headers, _ = board.request("GET", f"/job/{jid}")
    assert code == 303 and headers["location"].endswith(f"/q/{queue}/job/{jid}")
    code, page = board.get(f"/job/{ids.mint()}")
    assert code == 404 and "on any queue" in page


def test_notify_flow_and_the_backoff_read_in_words(url, conn, queue):
    with App(url) as app:
        @app.task(queue=queue, name="pay", backoff=[200, 500, 1000], max_attempts=4)
        def pay() -> None: ...

        jid = ids.mint()
        jobs.admit(conn, queue, jid, encode("pay", []), notify_ms=600_000)
        registry.add(conn, [queue])
        httpd = dashboard.serve(conn, port=0, tasks=app.tasks)
        try:
            code, page = Client(httpd.server_address[1]).get(f"/q/{queue}/job/{jid}")
        finally:
            httpd.shutdown()
    assert code == 200
    assert "the end token is kept 10m 00s after the job ends" in page
    assert "waits 200 ms, 500 ms, then 1.0 s before each later retry" in page
    assert "retries on" not in page


def test_an_active_job_names_the_worker_holding_it(conn, board, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("t", []))
    claim = jobs.claim(conn, queue, 60_000)
    assert claim is not None and claim.id == jid
    wid = f"w-{queue}"
    workers.register(conn, workers.Registration(
        id=wid, host="box-7", pid=4242, app="shop:app", queues=(queue,), concurrency=1,
        wire=4, version="test", heartbeat_ms=5_000))
    workers.heartbeat(conn, wid, 5_000, [workers.Running(jid, queue, "t", 0, 1)])
    try:
        code, page = board.get(f"/q/{queue}/job/{jid}")
    finally:
        workers.unregister(conn, wid)
    assert code == 200
    assert f"{wid} (shop:app, pid 4242 on box-7)" in page


def test_a_completed_job_kept_only_for_its_result_has_a_page(conn, board, queue):
    """Its row deleted at the ack (the default retention), its return value kept: the page
    (and ``/job/ID``, the link ``echomq job`` prints) shows it completed with the result,
    as ``app.job`` reports it, instead of "Not found"."""
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("t", []))
    registry.add(conn, [queue])
    claim = jobs.claim(conn, queue, 30_000)
    assert claim is not None and claim.id == jid
    jobs.ack(conn, queue, jid, claim.token, False, result='{"total": 90}',
             keep_result_ms=60_000)
    assert jobs.get(conn, queue, jid) is None  # no row: only the kept result
    code, headers, _ = board.request("GET", f"/job/{jid}")
    assert code == 303 and headers["location"].endswith(f"/q/{queue}/job/{jid}")
    code, page = board.get(f"/q/{queue}/job/{jid}")
    assert code == 200 and "completed" in page and "90" in page and "kept result" in page


def test_a_job_kept_only_for_its_result_names_its_task_and_runs(conn, board, queue):
    """Issue 32: the ack that deleted the row kept the task and runs beside the result, so
    the page names them instead of a bare "completed"."""
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("shop.total", [3]))
    registry.add(conn, [queue])
    claim = jobs.claim(conn, queue, 30_000)
    assert claim is not None and claim.id == jid
    jobs.ack(conn, queue, jid, claim.token, False, result="90", keep_result_ms=60_000)
    code, page = board.get(f"/q/{queue}/job/{jid}")
    assert code == 200 and "shop.total" in page and "1 run" in page
    assert "task, and runs remain" not in page and "task and runs remain" in page
