"""The dashboard against a real server: pages list what is there, actions act."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from echomq import dashboard, ids, jobs, repeat


@pytest.fixture
def board(conn, queue):
    httpd = dashboard.serve(conn, port=0, queues=[queue])
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.board
    httpd.shutdown()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def post(url: str, data: dict[str, str]) -> int:
    body = urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(url, data=body, method="POST")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # keep the 303 visible to the test
        return None


def test_pages_show_the_queue_and_its_jobs(board, conn, queue):
    base, _ = board
    dying, pending = ids.mint(), ids.mint()
    jobs.enqueue_many(conn, queue, [(dying, b"x"), (pending, b"<script>")])
    c = jobs.claim(conn, queue, 10_000)
    jobs.retry(conn, queue, c.id, c.token, 0, 1, "boom <b>")
    code, page = get(base + "/")
    assert code == 200 and queue in page
    code, page = get(f"{base}/q/{queue}?state=dead")
    assert code == 200 and dying in page and "boom &lt;b&gt;" in page and "<b>" not in page
    code, page = get(f"{base}/q/{queue}/job/{pending}")
    assert code == 200 and "&lt;script&gt;" in page
    assert json.loads(get(f"{base}/api/q/{queue}")[1])["counts"]["dead"] == 1
    assert json.loads(get(f"{base}/api/queues")[1])[queue]["pending"] == 1
    assert get(f"{base}/q/{queue}/job/{ids.mint()}")[0] == 404
    assert get(f"{base}/q/a{{b")[0] == 400
    assert get(f"{base}/q/{queue}?state=nope")[0] == 400


def test_revive_needs_the_form_token(board, conn, queue):
    base, b = board
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    c = jobs.claim(conn, queue, 10_000)
    jobs.retry(conn, queue, jid, c.token, 0, 1, "boom")
    assert post(f"{base}/q/{queue}/dead/{jid}/retry", {"token": "forged"}) == 403
    assert jobs.get(conn, queue, jid)["state"] == "dead"
    assert post(f"{base}/q/{queue}/dead/{jid}/retry", {"token": b.token}) == 303
    assert jobs.get(conn, queue, jid)["state"] == "pending"


def test_registrations_page_and_cancel(board, conn, queue):
    base, b = board
    repeat.register(conn, queue, "nightly", 86_400_000, b"{}", 1000)
    code, page = get(f"{base}/q/{queue}/repeat")
    assert code == 200 and "nightly" in page and "every 86400000 ms" in page
    assert post(f"{base}/q/{queue}/repeat/nightly/cancel", {"token": b.token}) == 303
    assert repeat.count(conn, queue) == 0


def test_discovery_finds_queues_by_their_sets(conn, queue):
    jobs.enqueue_in(conn, queue, ids.mint(), b"x", 60_000)
    assert queue in dashboard.discover_queues(conn)
