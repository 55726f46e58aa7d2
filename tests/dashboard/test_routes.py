"""The route table: what each path answers (a page, a 404 for no page, a 400 for a bad
queue name in a queue's path), whichever method; HEAD as GET."""

from __future__ import annotations

import pytest

from echomq.core import ids
from echomq.verbs import jobs

BAD = "no%20spaces%7Bhere%7D"  # a queue name keyspace refuses


@pytest.mark.parametrize(("path", "status"), [
    ("/", 200), ("/tasks", 200), ("/workers", 200), ("/busy", 200), ("/backoff", 200),
    ("/api/queues", 200), ("/api/workers", 200), ("/api/tasks", 200),
    ("/nowhere", 404), ("/api", 404), ("/api/nowhere", 404), ("/events/x", 404),
    ("/tasks/x", 404), (f"/tasks/{BAD}/t", 400),
    (f"/q/{BAD}", 400), (f"/q/{BAD}/clock", 400), (f"/q/{BAD}/anything", 400),
    (f"/api/q/{BAD}", 400), (f"/api/q/{BAD}/nowhere", 404),
])
def test_get_answers(board, path, status):
    assert board.get(path)[0] == status


def test_a_queue_s_paths(board, conn, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    for path in ("", "/clock", "/repeat", "/groups", f"/job/{jid}"):
        assert board.get(f"/q/{queue}{path}")[0] == 200, path
    for path in ("/job", "/nowhere", f"/job/{jid}/more", "/clock/more"):
        assert board.get(f"/q/{queue}{path}")[0] == 404, path
    assert board.get(f"/q/{queue}/job/{ids.mint()}")[0] == 404
    assert board.get(f"/api/q/{queue}")[0] == 200
    assert board.get(f"/api/q/{queue}/throughput?minutes=5")[0] == 200
    assert board.request("HEAD", f"/q/{queue}")[0] == 200


@pytest.mark.parametrize(("path", "status"), [
    ("/nowhere", 404), ("/q/x", 404), (f"/q/{BAD}", 404), (f"/q/{BAD}/pause", 400),
    ("/workers/x", 404), ("/workers/x/bogus", 404), ("/workers/x/quiet/more", 404),
])
def test_post_answers(board, path, status):
    assert board.post(path) == status


def test_a_queue_s_actions_refuse_an_unknown_verb(board, conn, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    for path in (f"/job/{jid}/bogus", "/repeat/r/bogus", "/groups/g/bogus", "/bogus",
                 f"/job/{jid}"):
        assert board.post(f"/q/{queue}{path}") == 404, path
    assert board.post(f"/q/{queue}/pause") == 303 and jobs.is_paused(conn, queue)
    assert board.post(f"/q/{queue}/resume") == 303 and not jobs.is_paused(conn, queue)


def test_a_batch_s_page_and_json(board, conn):
    import json

    from echomq.verbs import batches

    bid = ids.mint()
    batches.create(conn, bid, {})
    batches.enroll(conn, bid, ["JOBx", "JOBy"])
    batches.settle(conn, bid, [("JOBx", "completed")])
    status, body = board.get(f"/batch/{bid}")
    assert status == 200
    assert "1 of 2 members ended (50%), open" in body
    status, body = board.get(f"/api/batch/{bid}")
    assert status == 200
    assert json.loads(body) == {"id": bid, "total": 2, "pending": 1, "completed": 1, "dead": 0,
                                "closed": False, "fired": []}
    assert board.get(f"/batch/{ids.mint()}")[0] == 404
