"""The dashboard's operating pages over HTTP: Tasks (options, runs, failure rate, p50/p95
over an hour and a day, search), one task plotted, Workers (quiet/stop behind the access
gate), Busy, and a queue's throughput over a day from the minute ring."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import dashboard
from echomq.core import ids, keyspace
from echomq.dashboard import insight
from echomq.tasks.app import App
from echomq.verbs import jobs, taskmetrics, workers
from echomq.verbs.taskmetrics import CODES, empty
from tests.support.board import Client
from tests.support.polling import wait_for
from tests.support.workers import serving


def slots(**codes: int) -> list[int]:
    out = empty()
    for code, n in codes.items():
        out[CODES.index(code)] = n
    return out


@pytest.fixture
def shop(url: str, queue: str) -> Iterator[App]:
    app = App(url)

    @app.task(queue=queue, name="mail.send", max_attempts=5, timeout=30,
              backoff=("exponential", 1000, 60_000), keep_result=600)
    def send(to: str) -> str:
        return to

    @app.task(queue=queue, name="img.resize", max_attempts=1)
    def resize(n: int) -> None:
        if n % 2:
            raise ValueError("odd")

    @app.cron("*/5 * * * *", name="digest")
    @app.task(queue=queue, name="mail.digest")
    def digest() -> None: ...

    yield app
    app.close()


@pytest.fixture
def board(conn, queue, shop) -> Iterator[Client]:
    httpd = dashboard.serve(conn, port=0, queues=[queue], tasks=shop.tasks)
    yield Client(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.slow
def test_tasks_page_after_a_real_workload(board, conn, queue, shop):
    with serving(shop, [queue], beat_ms=50):
        for i in range(6):
            shop.enqueue("mail.send", f"u{i}@example.com")
        for i in range(4):
            shop.enqueue("img.resize", i)
        wait_for(lambda: sum(t.total for t in taskmetrics.totals(conn, queue).values()) == 10,
                 15, "runs counted")
    code, page = board.get("/tasks")
    assert code == 200
    for name in ("mail.send", "img.resize", "mail.digest"):
        assert f"data-task='{name}'" in page
    # options from the app: the list summarises them (it fits 1400 px), the task's own page
    # spells out the timeout, the retries and backoff and keep_result; the cron is listed
    assert "*/5 * * * *" in page
    own = board.get(f"/tasks/{queue}/mail.send")[1]
    assert "30.0 s" in own and "5 attempts" in own and "10m 00s" in own
    got = {r["task"]: r for r in json.loads(board.get("/api/tasks")[1])}
    assert got["mail.send"]["hour"]["runs"]["completed"] == 6
    assert got["mail.send"]["day"]["total"] == 6
    assert got["img.resize"]["hour"]["failure_rate"] == pytest.approx(0.5)
    assert got["img.resize"]["day"]["runs"]["dead"] == 2
    assert got["mail.send"]["hour"]["p50_s"] is not None
    assert got["mail.digest"]["hour"]["total"] == 0
    # search by name (any case)
    code, page = board.get("/tasks?q=MAIL")
    assert "data-task='mail.send'" in page and "data-task='img.resize'" not in page
    assert "No task matches" in board.get("/tasks?q=nothing-like-it")[1]
    # one task, plotted: an hour per minute and a day per half hour
    code, page = board.get(f"/tasks/{queue}/img.resize")
    assert code == 200 and page.count("<svg class='taskchart'") == 2
    assert "class='failbar'" in page and "class='okbar'" in page
    assert "2 completed" in page.replace("<b>", "").replace("</b>", "")
    assert board.get(f"/tasks/{queue}/no.such.task")[0] == 404


def test_a_day_of_buckets_sums_into_hour_and_day(board, conn, queue):
    now = jobs.server_now_ms(conn)
    taskmetrics.record(conn, queue, {"etl.load": slots(c=10, h4=10, s=500_000)}, now)
    taskmetrics.record(conn, queue, {"etl.load": slots(c=5, r=3, d=2, h6=10, s=4_000_000)},
                       now - 3 * 3_600_000)  # three hours ago: the day, not the hour
    got = {r["task"]: r for r in json.loads(board.get("/api/tasks")[1])}["etl.load"]
    assert got["hour"]["total"] == 10 and got["hour"]["failure_rate"] == 0
    assert got["day"]["total"] == 20 and got["day"]["failures"] == 5
    assert got["day"]["failure_rate"] == pytest.approx(0.25)
    assert 0.05 < got["hour"]["p95_s"] <= 0.1 < got["day"]["p95_s"] <= 0.5
    assert got["options"] == {}  # counted by a worker, declared by none


def _register(conn: Any, queues: tuple[str, ...]) -> workers.Registration:
    reg = workers.Registration(
        id=f"test-{ids.mint()[-10:]}", host=socket.gethostname(), pid=os.getpid(),
        app="shop:app", queues=queues, concurrency=4, wire=4, version="test",
        heartbeat_ms=30_000, tasks={queues[0]: ["mail.send"]})
    workers.register(conn, reg)
    return reg


def test_workers_and_busy_pages(board, conn, queue):
    reg = _register(conn, (queue,))
    try:
        now = jobs.server_now_ms(conn)
        jid = ids.mint()
        workers.heartbeat(conn, reg.id, reg.heartbeat_ms,
                          [workers.Running(jid, queue, "mail.send", now - 90_000, 3)])
        code, page = board.get("/workers")
        assert code == 200 and f"data-worker='{reg.id}'" in page
        assert "1 / 4" in page and "/workers/" + reg.id + "/quiet" in page
        code, page = board.get("/busy")
        assert code == 200 and f"data-job='{jid}'" in page and "mail.send" in page
        assert "1m 3" in page  # running for a minute and a half
        row = page.split(f"data-job='{jid}'", 1)[1].split("</tr>", 1)[0]
        assert "<td class='n'>3</td>" in row and f"/q/{queue}/job/{jid}" in row
        api = {w["id"]: w for w in json.loads(board.get("/api/workers")[1])}
        assert api[reg.id]["busy"][0]["task"] == "mail.send"
        # quiet from the page: the request reaches the registry
        assert board.post(f"/workers/{reg.id}/quiet") == 303
        rec = next(w for w in workers.live(conn) if w.id == reg.id)
        assert rec.requested == "quiet"
        assert board.post("/workers/no-such-worker/stop") == 404
        assert board.post(f"/workers/{reg.id}/reboot") == 404
    finally:
        workers.unregister(conn, reg.id)


def test_worker_buttons_stay_behind_the_access_gate(board, conn, queue):
    reg = _register(conn, (queue,))
    ro = dashboard.serve(conn, port=0, queues=[queue], read_only=True)
    try:
        c = Client(ro.server_address[1])
        code, page = c.get("/workers")
        assert code == 200 and f"data-worker='{reg.id}'" in page and "/quiet" not in page
        assert c.post(f"/workers/{reg.id}/stop") == 403
        board.origin = "http://evil.example"  # a writable dashboard, another site's form
        assert board.post(f"/workers/{reg.id}/stop") == 403
        assert next(w for w in workers.live(conn) if w.id == reg.id).requested is None
    finally:
        ro.shutdown()
        ro.server_close()
        workers.unregister(conn, reg.id)


def test_queue_throughput_over_a_day_from_the_ring(board, conn, raw, queue):
    now = jobs.server_now_ms(conn)
    minute = now // 60_000
    ring: dict[str, int] = {}
    for back in range(0, 1440, 10):
        m = minute - back
        ring.update({f"{m % 1440}:t": m, f"{m % 1440}:c": back + 1, f"{m % 1440}:f": 1})
    stale = minute - 1440 - 3  # written a day and 3 minutes ago: reads as zero
    ring.update({f"{stale % 1440}:t": stale, f"{stale % 1440}:c": 99})
    raw.hset(keyspace.queue_key(queue, "series"), mapping=ring)
    day = insight.throughput(conn, queue, 1440)
    assert len(day) == 1440 and day[-1] == (minute, 1, 1)
    assert sum(c for _, c, _ in day) == sum(b + 1 for b in range(0, 1440, 10))
    assert day[1440 - 1 - 3] == (minute - 3, 0, 0)
    # the overview's hour: the same with a HOST hint (one round trip) or without
    for hint in (None, now, now - 4 * 60_000):
        v = insight.overview(conn, queue, hint)
        assert v.series == day[-60:]
    body = json.loads(board.get(f"/api/q/{queue}/throughput?minutes=30")[1])
    assert [m["completed"] for m in body["minutes"]] == [c for _, c, _ in day[-30:]]
    with pytest.raises(ValueError):
        insight.throughput(conn, queue, 1441)
