"""A partitioned queue on the dashboard is one queue: ``/api/queues`` folds its partitions
into one entry, the folded page sums the counts and pages jobs across every partition (each
partition's own bounded page, merged), and a job opens in its own partition."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from echomq import App, dashboard
from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs
from tests.support.board import Client


@pytest.fixture
def mail(url, conn, queue) -> Iterator[tuple[Client, App, list[str]]]:
    app = App(url)
    send = app.task(lambda to: None, queue=queue, name=f"{queue}.send", partitions=3)
    httpd = dashboard.serve(conn, port=0, tasks=app.tasks)
    yield Client(httpd.server_address[1]), app, list(send.queues)
    httpd.shutdown()
    httpd.server_close()
    app.close()


def put(conn, queue: str, n: int) -> list[str]:
    out = []
    for i in range(n):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, encode(f"{queue}.send", [i], {}))
        out.append(jid)
    return out


def test_api_queues_shows_a_partitioned_queue_as_one_entry(mail, conn, queue):
    board, _, parts = mail
    assert parts == [f"{queue}#0", f"{queue}#1", f"{queue}#2"]
    for i, p in enumerate(parts):
        put(conn, p, i + 1)  # 1, 2, 3 pending
    got = json.loads(board.get("/api/queues")[1])
    assert not any(k.startswith(queue + "#") for k in got), got.keys()
    entry = got[queue]
    assert entry["pending"] == 6 and entry["partitions"] == 3
    assert {p: c["pending"] for p, c in entry["by_partition"].items()} == {
        parts[0]: 1, parts[1]: 2, parts[2]: 3}
    assert json.loads(board.get(f"/api/q/{queue}")[1])["counts"]["pending"] == 6


def test_the_folded_page_lists_every_partition_and_a_job_opens_in_its_own(mail, conn, queue):
    board, _, parts = mail
    made = {p: put(conn, p, 25) for p in parts}  # 75 jobs: two pages of 50
    code, page = board.get("/")
    assert code == 200 and f"href='/q/{queue}'" in page  # the overview links the folded page
    seen: list[str] = []
    path = f"/q/{queue}?state=pending"
    pages = 0
    while path:
        code, page = board.get(path)
        assert code == 200, page
        pages += 1
        assert "75 pending in all" in page
        seen += re.findall(r"/job/([0-9A-Z]+)'", page)
        m = re.search(r"href='([^']+)'>next 50", page)
        path = m.group(1).replace("&amp;", "&") if m else ""
    assert pages == 2
    assert sorted(seen) == sorted(j for js in made.values() for j in js)  # none twice, none lost
    # every partition's jobs are listed, each linked to its own partition
    _, first = board.get(f"/q/{queue}?state=pending")
    for p in parts:
        assert f"/q/{p.replace('#', '%23')}/job/" in first
    target = made[parts[2]][0]
    code, job = board.get(f"/q/{queue}%232/job/{target}")
    assert code == 200 and target in job
    # the folded queue's job url and its search find the job in mail#2
    status, headers, _ = board.request("GET", f"/q/{queue}/job/{target}")
    assert status in (302, 303) and headers["location"].endswith(f"%232/job/{target}")
    status, headers, _ = board.request("GET", f"/q/{queue}?id={target}")
    assert status in (302, 303) and f"%232/job/{target}" in headers["location"]
    assert board.get(f"/q/{queue}/job/{ids.mint()}")[0] == 404
    assert board.get(f"/q/{queue}?state=pending&after=nope")[0] == 400
