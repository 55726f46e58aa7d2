"""The dashboard against a real server over real HTTP: pages show what is there, actions
act, and the access rules hold (Host, Origin, headers, token, read-only)."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from typing import Any

import pytest

from echomq import dashboard
from echomq.core import ids
from echomq.core.payload import encode
from echomq.dashboard import insight
from echomq.verbs import dead, jobs, metrics, repeat
from tests.support.board import Client
from tests.support.paths import ROOT


def die(conn, queue: str, payload: bytes = b"x", error: str = "boom") -> str:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, payload)
    c = jobs.claim(conn, queue, 10_000)
    assert c is not None and c.id == jid
    assert jobs.retry(conn, queue, jid, c.token, 0, 1, error) == "dead"
    return jid


# -- pages ----------------------------------------------------------------------------------

def test_pages_show_the_queue_and_its_jobs(board, conn, queue):
    dying = die(conn, queue, b"x", "boom <b>")
    pending = ids.mint()
    jobs.enqueue(conn, queue, pending, b"<script>")
    code, page = board.get("/")
    assert code == 200 and queue in page
    code, page = board.get(f"/q/{queue}?state=dead")
    assert code == 200 and dying in page and "boom &lt;b&gt;" in page and "<b>boom" not in page
    code, page = board.get(f"/q/{queue}/job/{pending}")
    assert code == 200 and "&lt;script&gt;" in page and "<script>" not in page.split("</head>")[1]
    assert json.loads(board.get(f"/api/q/{queue}")[1])["counts"]["dead"] == 1
    assert json.loads(board.get("/api/queues")[1])[queue]["pending"] == 1
    assert board.get(f"/q/{queue}/job/{ids.mint()}")[0] == 404
    assert board.get("/q/a{b")[0] == 400
    assert board.get(f"/q/{queue}?state=nope")[0] == 400


def test_an_empty_queue_is_listed(conn, queue):
    httpd = dashboard.serve(conn, port=0, queues=[queue, queue + "-empty"])
    try:
        code, page = Client(httpd.server_address[1]).get("/")
        assert code == 200 and f"{queue}-empty" in page
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_job_lists_show_task_args_and_time_remaining(board, conn, queue):
    jid = ids.mint()
    jobs.enqueue_in(conn, queue, jid, encode("mail.send", ["ada@example.com"], {"n": 3}),
                    3_600_000)
    code, page = board.get(f"/q/{queue}?state=scheduled")
    assert code == 200
    assert "mail.send" in page and "&quot;ada@example.com&quot;, n=3" in page
    assert re.search(r"in (59m \d\ds|1h 00m)", page), "time remaining shown"


def test_cursor_paging_walks_every_job_once(board, conn, queue):
    minted = [ids.mint() for _ in range(123)]
    jobs.enqueue_many(conn, queue, [(j, b"x") for j in minted])
    seen: list[str] = []
    path = f"/q/{queue}?state=pending"
    for _ in range(5):
        code, page = board.get(path)
        assert code == 200
        seen += re.findall(r"<code>(JOB[0-9A-Z]{26})</code></a></td>", page)
        nxt = re.search(r"href='([^']+)'>next 50", page)
        if not nxt:
            break
        path = nxt.group(1).replace("&amp;", "&")
    assert seen == minted  # claim order, each once


def test_cursor_survives_the_cursor_job_leaving(conn, queue):
    now = jobs.server_now_ms(conn)
    minted = [ids.mint() for _ in range(10)]
    for i, j in enumerate(minted):
        jobs.enqueue_at(conn, queue, j, b"x", now + 60_000 + i)
    first = insight.page(conn, queue, "scheduled", None, 4)
    assert [x["id"] for x in first.entries] == minted[:4] and first.next_cursor
    insight.discard(conn, queue, minted[3])  # the cursor's own job goes
    second = insight.page(conn, queue, "scheduled", first.next_cursor, 4)
    assert [x["id"] for x in second.entries] == minted[4:8]
    tied = [ids.mint() for _ in range(6)]
    jobs.enqueue_many(conn, queue, [(j, b"x") for j in tied])
    first = insight.page(conn, queue, "pending", None, 3)
    insight.discard(conn, queue, tied[2])
    again = insight.page(conn, queue, "pending", first.next_cursor, 10)
    assert set(tied) - {tied[2]} <= {x["id"] for x in again.entries}  # none skipped


def test_search_by_id_goes_to_the_job(board, conn, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    status, headers, _ = board.request("GET", f"/find?id={jid}")
    assert status == 303 and headers["location"] == f"/q/{queue}/job/{jid}"
    status, headers, _ = board.request("GET", f"/q/{queue}?id={jid}")
    assert status == 303
    assert board.get(f"/find?id={ids.mint()}")[0] == 404


def test_job_detail_shows_payload_error_and_times(board, conn, queue):
    jid = die(conn, queue, encode("report.build", [2024], {}), "ValueError: no data")
    code, page = board.get(f"/q/{queue}/job/{jid}")
    assert code == 200
    assert "report.build" in page and "ValueError: no data" in page
    assert '"args": [\n    2024\n  ]' in page.replace("&quot;", '"')  # pretty-printed
    assert "died" in page and re.search(r"data-ms='\d{13}'", page)
    assert f"/q/{queue}/job/{jid}/retry" in page


def test_job_actions_retry_run_now_delete(board, conn, queue):
    jid = die(conn, queue)
    assert board.post(f"/q/{queue}/job/{jid}/retry") == 303
    assert jobs.get(conn, queue, jid)["state"] == "pending"
    later = ids.mint()
    jobs.enqueue_in(conn, queue, later, b"x", 3_600_000)
    assert board.post(f"/q/{queue}/job/{later}/run") == 303
    assert jobs.promote(conn, queue, 10) == 1  # due now
    gone = ids.mint()
    jobs.enqueue_in(conn, queue, gone, b"x", 3_600_000)
    assert board.post(f"/q/{queue}/job/{gone}/delete") == 303
    assert jobs.get(conn, queue, gone) is None
    assert jobs.counts(conn, queue)["scheduled"] == 0
    held = jobs.claim(conn, queue, 10_000)
    assert held is not None
    assert board.post(f"/q/{queue}/job/{held.id}/delete") == 409  # running: refused
    assert jobs.get(conn, queue, held.id)["state"] == "active"


def test_pause_and_resume_a_queue(board, conn, queue):
    assert board.post(f"/q/{queue}/pause") == 303
    assert jobs.is_paused(conn, queue)
    code, page = board.get("/")
    assert code == 200 and "data-k='paused'>paused</span>" in page
    assert f"/q/{queue}/resume" in page
    assert board.post(f"/q/{queue}/resume") == 303
    assert not jobs.is_paused(conn, queue)


def test_cancel_a_waiting_job(board, conn, queue):
    jid = ids.mint()
    jobs.enqueue_in(conn, queue, jid, b"x", 3_600_000)
    assert board.post(f"/q/{queue}/job/{jid}/cancel") == 303
    assert jobs.get(conn, queue, jid)["state"] == "cancelled"
    code, page = board.get(f"/q/{queue}?state=cancelled")
    assert code == 200 and jid in page


def test_groups_page_and_pause(board, conn, queue):
    from echomq.verbs import groups
    for g in ("tenant-a", "tenant-b"):
        for _ in range(3 if g == "tenant-a" else 1):
            jobs.enqueue(conn, queue, ids.mint(), b"x", group=g)
    groups.set_limit(conn, queue, "tenant-a", 2)
    groups.set_rate(conn, queue, "tenant-b", 10, 60_000)
    groups.set_weight(conn, queue, "tenant-a", 3)
    code, page = board.get(f"/q/{queue}/groups")
    assert code == 200
    row_a = page.split("data-group='tenant-a'")[1].split("</tr>")[0]
    assert "<td class='n'>3</td><td class='n'>0</td><td class='n'>2</td>" in row_a
    assert "10 per 1m 00s" in page
    # the weight column: tenant-a's 3, tenant-b's default 1
    cells = [c.split(">", 1)[1].split("</td>")[0] for c in row_a.split("<td")[1:]]
    assert cells[5] == "3"  # group, waiting, active, limit, rate, weight
    row_b = page.split("data-group='tenant-b'")[1].split("</tr>")[0]
    assert [c.split(">", 1)[1].split("</td>")[0] for c in row_b.split("<td")[1:]][5] == "1"
    assert ">weight</th>" in page
    assert board.post(f"/q/{queue}/groups/tenant-a/pause") == 303
    assert groups.stats(conn, queue)["tenant-a"].paused
    assert "paused</span>" in board.get(f"/q/{queue}/groups")[1]
    assert board.post(f"/q/{queue}/groups/tenant-a/resume") == 303
    assert not groups.stats(conn, queue)["tenant-a"].paused


def test_group_pages_walk_every_group(conn, queue):
    from echomq.verbs import groups
    names = {f"g{i:03d}" for i in range(300)}  # past the listpack size: SSCAN pages
    for g in names:
        groups.pause(conn, queue, g)
    seen: set[str] = set()
    cursor: str | None = "0"
    rounds = 0
    while cursor is not None:
        page = insight.group_page(conn, queue, cursor, 50)
        assert len(page.groups) <= 120
        seen |= set(page.groups)
        cursor, rounds = page.next_cursor, rounds + 1
    assert seen == names and rounds > 2


def test_dead_bulk_retry_asks_first(board, conn, queue):
    a, b, c = die(conn, queue), die(conn, queue), die(conn, queue)
    code, _, page = board.request("POST", f"/q/{queue}/bulk", {"op": "retry", "id": [a, b]})
    assert code == 200 and "Retry these 2 dead job(s)?" in page
    assert dead.count(conn, queue) == 3  # nothing yet
    assert board.post(f"/q/{queue}/bulk", {"op": "retry", "id": [a, b], "confirm": "1"}) == 303
    assert jobs.get(conn, queue, a)["state"] == "pending"
    assert jobs.get(conn, queue, b)["state"] == "pending"
    assert board.post(f"/q/{queue}/bulk", {"op": "delete", "all": "1", "confirm": "1"}) == 303
    assert jobs.get(conn, queue, c) is None and dead.count(conn, queue) == 0


def test_registrations_show_next_five_runs_in_their_zone(board, conn, queue):
    repeat.register(conn, queue, "nightly", 86_400_000, b"{}", 1000)
    repeat.register_cron(conn, queue, "paris-9am", "0 9 * * *", b"{}", tz="Europe/Paris")
    code, page = board.get(f"/q/{queue}/repeat")
    assert code == 200 and "nightly" in page and "every 1d 00h" in page
    runs = re.findall(r"<li>(\d{4}-\d\d-\d\d 09:00:00 CES?T)</li>", page)
    assert len(runs) == 5
    assert board.post(f"/q/{queue}/repeat/nightly/cancel") == 303
    assert repeat.count(conn, queue) == 1


def test_schedule_clock_counts_what_a_promote_would_release(board, conn, queue):
    now = jobs.server_now_ms(conn)
    soon = [ids.mint() for _ in range(3)]
    for i, j in enumerate(soon):
        jobs.enqueue_at(conn, queue, j, b"x", now + 10_000 * (i + 1))
    jobs.enqueue_at(conn, queue, ids.mint(), b"x", now + 3_600_000)
    code, page = board.get(f"/q/{queue}/clock?at={now + 25_000}")
    assert code == 200 and "id='release-count'>2<" in page and soon[0] in page
    body = json.loads(board.get(f"/api/q/{queue}/release?at={now + 35_000}")[1])
    assert body["count"] == 3 and [x["id"] for x in body["first"]] == soon
    assert body["scheduled"] == 4


def test_backoff_curve_totals_time_to_dead_letter(board):
    code, page = board.get("/backoff?kind=exponential&base=1000&cap=60000&max_attempts=5")
    assert code == 200 and "<svg class='curve'" in page
    # retries after attempts 1..4: 1 + 2 + 4 + 8 s
    assert "id='backoff-total'>15.0 s<" in page
    code, page = board.get("/backoff?kind=fixed&base=500&max_attempts=3&jitter=1")
    assert "between 0 ms and 1.0 s" in page
    assert board.get("/backoff?kind=exponential&base=0&cap=1")[0] == 400


# -- metrics --------------------------------------------------------------------------------

def test_metrics_scrape_parses_and_reports_the_server_side_numbers(board, conn, queue):
    from prometheus_client.parser import text_string_to_metric_families

    die(conn, queue)
    jobs.enqueue(conn, queue, ids.mint(), b"x")
    jobs.enqueue_in(conn, queue, ids.mint(), b"x", 60_000)
    metrics.observe(conn, queue, [0.003, 0.2, 0.2, 7.0], completed=3, failed=1, beat_s=0.002,
                    degraded=0)
    code, text = board.get("/metrics")
    assert code == 200
    fams = {f.name: f for f in text_string_to_metric_families(text)}

    def sample(family: str, name: str, **labels: str) -> float:
        for s in fams[family].samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
        raise AssertionError(f"{name} {labels} missing")

    assert sample("echomq_jobs", "echomq_jobs", queue=queue, state="pending") == 1
    assert sample("echomq_jobs", "echomq_jobs", queue=queue, state="scheduled") == 1
    assert sample("echomq_jobs", "echomq_jobs", queue=queue, state="dead") == 1
    h = "echomq_handler_duration_seconds"
    assert sample(h, h + "_count", queue=queue) == 4
    assert sample(h, h + "_bucket", queue=queue, le="0.005") == 1
    assert sample(h, h + "_bucket", queue=queue, le="0.25") == 3
    assert sample(h, h + "_bucket", queue=queue, le="+Inf") == 4
    assert sample(h, h + "_sum", queue=queue) == pytest.approx(7.403)
    assert sample("echomq_beat_duration_seconds", "echomq_beat_duration_seconds_count",
                  queue=queue) == 1
    assert "echomq_jobs_completed" in fams and "echomq_promote_lag_seconds" in fams
    # totals from the counters the transitions keep on the server (emq:{q}:stats)
    assert sample("echomq_jobs_dead", "echomq_jobs_dead_total", queue=queue) == 1
    assert sample("echomq_jobs_failed", "echomq_jobs_failed_total", queue=queue) == 1
    assert sample("echomq_jobs_enqueued", "echomq_jobs_enqueued_total", queue=queue) == 3
    view = insight.overview(conn, queue)
    assert view.series[-1][1:] == (3, 1)  # this minute: 3 completed, 1 failed


def test_events_stream_sends_counts(board, conn, queue):
    jobs.enqueue(conn, queue, ids.mint(), b"x")
    c = http.client.HTTPConnection("127.0.0.1", board.port, timeout=10)
    c.request("GET", "/events", headers={"Host": f"127.0.0.1:{board.port}"})
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
    buf = b""
    while b"event: counts" not in buf or not buf.endswith(b"\n\n"):
        buf += r.read1(4096)
    data = json.loads(buf.split(b"event: counts\ndata: ")[1].split(b"\n")[0])
    assert data["queues"][queue]["counts"]["pending"] == 1
    c.close()


# -- access ---------------------------------------------------------------------------------

def test_foreign_host_headers_are_refused(board, conn, queue):
    """DNS rebinding: evil.example resolving to 127.0.0.1 must not read a page."""
    assert board.get("/", headers={"Host": f"evil.example:{board.port}"})[0] == 421
    assert board.get("/metrics", headers={"Host": f"evil.example:{board.port}"})[0] == 421
    assert board.get("/", headers={"Host": f"localhost:{board.port}"})[0] == 200
    assert board.get("/", headers={"Host": "127.0.0.1:1"})[0] == 421


def test_allow_list_adds_host_names(conn, queue):
    httpd = dashboard.serve(conn, port=0, queues=[queue], allow_hosts=["queues.internal"])
    try:
        c = Client(httpd.server_address[1])
        assert c.get("/", headers={"Host": "queues.internal"})[0] == 200
        assert c.get("/", headers={"Host": "other.internal"})[0] == 421
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_posts_need_a_same_origin(board, conn, queue):
    jid = die(conn, queue)
    path = f"/q/{queue}/job/{jid}/retry"
    assert board.post(path, headers={"Origin": None}) == 403  # neither Origin nor Referer
    assert board.post(path, headers={"Origin": "http://evil.example"}) == 403
    assert board.post(path, headers={"Origin": "null"}) == 403
    assert board.post(path, headers={"Origin": None,
                                     "Referer": f"http://evil.example:{board.port}/"}) == 403
    assert jobs.get(conn, queue, jid)["state"] == "dead"
    assert board.post(path, headers={"Origin": None,
                                     "Referer": f"{board.origin}/q/{queue}"}) == 303
    assert jobs.get(conn, queue, jid)["state"] == "pending"


def test_every_answer_forbids_framing_and_sniffing(board, queue):
    for path in ("/", f"/q/{queue}", "/static/dashboard.css", "/nope", "/metrics"):
        _, headers, _ = board.request("GET", path)
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    _, headers, _ = board.request("GET", "/", headers={"Host": "evil.example"})
    assert headers["x-frame-options"] == "DENY"


def test_token_guards_everything(conn, queue):
    httpd = dashboard.serve(conn, port=0, queues=[queue], token="s3cret-token")
    try:
        c = Client(httpd.server_address[1])
        code, page = c.get("/")
        assert code == 401 and "Sign in" in page and queue not in page
        assert c.get(f"/q/{queue}")[0] == 401
        assert c.get("/metrics")[0] == 401
        assert c.get("/api/queues")[0] == 401
        assert c.get("/?token=wrong")[0] == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer s3cret-token"})[0] == 200
        status, headers, _ = c.request("GET", f"/q/{queue}?state=dead&token=s3cret-token")
        assert status == 303 and headers["location"] == f"/q/{queue}?state=dead"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        c.cookie = cookie.split(";")[0]
        assert c.get(f"/q/{queue}")[0] == 200
        jid = die(conn, queue)
        c2 = Client(httpd.server_address[1])  # no cookie: an action is refused too
        assert c2.post(f"/q/{queue}/job/{jid}/retry") == 401
        assert c.post(f"/q/{queue}/job/{jid}/retry") == 303
        status, headers, _ = c2.request("POST", "/login", {"token": "s3cret-token"})
        assert status == 303 and "echomq_dashboard=s3cret-token" in headers["set-cookie"]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_non_loopback_bind_needs_a_token(conn):
    with pytest.raises(ValueError, match="without an access token"):
        dashboard.serve(conn, host="0.0.0.0", port=0)
    httpd = dashboard.serve(conn, host="0.0.0.0", port=0, token="t0ken")
    try:
        c = Client(httpd.server_address[1])
        assert c.get("/")[0] == 401
        assert c.get("/", headers={"Authorization": "Bearer t0ken"})[0] == 200
        assert c.get("/", headers={"Authorization": "Bearer t0ken",
                                   "Host": f"rebound.example:{c.port}"})[0] == 421
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_read_only_refuses_actions_and_draws_no_buttons(conn, queue):
    jid = die(conn, queue)
    httpd = dashboard.serve(conn, port=0, queues=[queue], read_only=True)
    try:
        c = Client(httpd.server_address[1])
        code, page = c.get(f"/q/{queue}/job/{jid}")
        assert code == 200 and "/retry" not in page
        assert c.post(f"/q/{queue}/job/{jid}/retry") == 403
        assert jobs.get(conn, queue, jid)["state"] == "dead"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "dashboard", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_cli_refuses_a_wildcard_bind_without_a_token(url):
    p = _cli("--url", url, "--host", "0.0.0.0", "--port", "0",
             env={"ECHOMQ_DASHBOARD_TOKEN": ""})
    _, err = p.communicate(timeout=30)
    assert p.returncode == 2
    assert "without an access token" in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_generates_and_prints_a_token(url, queue):
    p = _cli("--url", url, "--port", "0", "--token", "auto", "--queue", queue)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]{20,})", line)
        assert m, line
        c = Client(int(m.group(1)))
        assert c.get("/")[0] == 401
        assert c.get("/", headers={"Authorization": f"Bearer {m.group(2)}"})[0] == 200
    finally:
        p.terminate()
        p.wait(timeout=10)


# -- the consumer reports its numbers ----------------------------------------------------------

@pytest.mark.slow
def test_consumer_reports_handler_durations(url, queue):
    import asyncio

    from echomq import AsyncConnector
    from echomq.runtime.consumer import Consumer

    async def main() -> None:
        aconn = await AsyncConnector.connect(url)
        for _ in range(5):
            await jobs.enqueue(aconn, queue, ids.mint(), b"x")

        async def handler(job: Any) -> None:
            await asyncio.sleep(0.02)

        c = Consumer(aconn, queue, handler, concurrency=2, beat_ms=50)
        stop = asyncio.Event()
        run = asyncio.ensure_future(c.run(stop))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (await metrics.read(aconn, queue)).duration_count >= 5:
                break
            await asyncio.sleep(0.1)
        stop.set()
        await run
        await c.drain(5)
        o = await metrics.read(aconn, queue)
        assert o.duration_count == 5 and o.duration_sum_s >= 0.1
        assert sum(o.buckets[:2]) == 0 and sum(o.buckets[2:5]) == 5  # 10..100 ms each
        assert o.beat_count >= 1
        await aconn.close()

    asyncio.run(main())


def test_grafana_sample_reads_only_metrics_the_scrape_has(board, conn, queue):

    from echomq.verbs import taskmetrics

    die(conn, queue)
    metrics.observe(conn, queue, [0.1], completed=1, beat_s=0.01, degraded=0)
    slots = taskmetrics.empty()
    slots[0] = slots[taskmetrics.CODES.index("h3")] = 1
    taskmetrics.record(conn, queue, {"a.task": slots}, jobs.server_now_ms(conn))
    jobs.enqueue(conn, queue, ids.mint(), b"x", group="tenant")
    _, text = board.get("/metrics")
    names = set(re.findall(r"^(echomq_\w+?)(?:\{| )", text, re.M))
    doc = ROOT / "docs" / "grafana-echomq.json"
    dash = json.loads(doc.read_text())
    used = {m for p in dash["panels"] for t in p["targets"]
            for m in re.findall(r"echomq_\w+", t["expr"])}
    assert used and used <= names, used - names


def test_an_apps_tasks_show_their_retry_policies(conn, queue):
    from echomq.tasks.app import App

    app = App("valkey://127.0.0.1:1")  # never connected: only its task table is read

    @app.task(queue=queue, max_attempts=5, backoff=("exponential", 1000, 60_000))
    def send(to: str) -> None: ...

    @app.task(queue=queue + "-other", max_attempts=3)
    def tidy() -> None: ...

    httpd = dashboard.serve(conn, port=0, tasks=app.tasks)
    try:
        c = Client(httpd.server_address[1])
        code, page = c.get("/tasks")  # the list summarises; each task's page spells out
        assert code == 200 and "5 attempts" in page and "3 attempts" in page
        send_name, tidy_name = list(app.tasks)
        code, page = c.get(f"/tasks/{queue}/{send_name}")
        assert code == 200 and "&#x27;exponential&#x27;, 1000, 60000" in page
        assert "15.0 s" in page  # 1+2+4+8 s
        code, page = c.get(f"/tasks/{queue}-other/{tidy_name}")
        assert "2.0 s" in page  # tidy: 2 x the 1 s default
        code, page = c.get("/")
        assert queue + "-other" in page  # the app's queues, listed while empty
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, encode(next(iter(app.tasks)), ["a@b.c"]))
        code, page = c.get(f"/q/{queue}/job/{jid}")
        assert ("runs up to 5 times and waits 1.0 s, doubling up to 1m 00s, before a retry: "
                "dead-lettered 15.0 s") in page
        name = next(iter(app.tasks))
        code, page = c.get(f"/backoff?task={name}")
        assert "id='backoff-total'>15.0 s<" in page and "own policy" in page
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_valkey_going_away_gives_a_clear_page_and_recovers():
    """A Valkey restart: a 503 page that says so and reloads itself (never a bare 502), a
    ``down`` event on the stream, and pages again once the server is back."""
    from echomq import Connector
    from echomq.embedded.server import EmbeddedServer

    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    parts = urllib.parse.urlsplit(srv.url)
    conn = Connector.connect(srv.url)
    httpd = dashboard.serve(conn, port=0, queues=["q"])
    c = Client(httpd.server_address[1])
    try:
        assert c.get("/")[0] == 200
        srv.stop()
        code, headers, page = c.request("GET", "/")
        assert code == 503 and "not answering" in page and headers["retry-after"] == "2"
        assert "http-equiv='refresh'" in page
        h = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        h.request("GET", "/events", headers={"Host": f"127.0.0.1:{c.port}"})
        r = h.getresponse()
        buf = b""
        while b"event: down" not in buf:
            buf += r.read1(4096)
        h.close()
        srv = EmbeddedServer(ephemeral=True, port=parts.port, password=parts.password)
        srv.start()
        deadline = time.monotonic() + 10
        while c.get("/")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert c.get("/")[0] == 200
    finally:
        httpd.shutdown()
        httpd.server_close()
        conn.close()
        srv.stop()


@pytest.mark.slow
def test_a_worker_pool_reports_handler_and_beat_times(url, queue):
    """A Worker (consumers pooled under a Metronome): the handler histogram comes from the
    consumers, the beat time from the Metronome."""
    import asyncio

    from echomq.tasks.app import App
    from echomq.tasks.worker import Worker

    app = App(url)

    @app.task(queue=queue)
    def work(n: int) -> int:
        time.sleep(0.002)
        return n

    import datetime as dt

    for i in range(3):
        work.enqueue(i)
    # a run-at to promote: the Metronome beats a queue with something due (an idle one
    # it leaves alone), so this one gets beats to time
    work.enqueue_in(dt.timedelta(milliseconds=500), 3)

    async def main() -> None:
        stop = asyncio.Event()
        run = asyncio.ensure_future(Worker(app, [queue], concurrency=2, beat_ms=50).run(stop))
        deadline = time.monotonic() + 15
        o = metrics.read(app.connector(queue), queue)
        while time.monotonic() < deadline and (o.duration_count < 4 or o.beat_count < 1):
            await asyncio.sleep(0.2)
            o = metrics.read(app.connector(queue), queue)
        stop.set()
        await run
        assert o.duration_count == 4 and o.beat_count >= 1 and o.beat_last_s is not None

    asyncio.run(main())
    app.close()


def test_a_flow_is_drawn_as_a_tree(board, conn, queue):
    from echomq.verbs import flows
    from echomq.verbs.flows import Node

    other = queue + "-kids"
    grand = Node(other, ids.mint(), b"{}")
    mid = Node(other, ids.mint(), b"{}", children=(grand,))
    leaf = Node(other, ids.mint(), b"{}")
    root = Node(queue, ids.mint(), encode("report.merge", [], {}), children=(mid, leaf))
    flows.admit(conn, root)
    code, page = board.get(f"/q/{queue}/job/{root.id}")
    assert code == 200 and "<ul class='tree'>" in page
    tree = page.split("<ul class='tree'>")[1]
    for node in (root, mid, leaf, grand):
        assert f"/q/{node.queue}/job/{node.id}" in tree
    assert tree.index(mid.id) < tree.index(grand.id) < tree.index(leaf.id)  # depth first
    assert "waiting-children</span>" in tree and f"/q/{queue}/job/{root.id}/delete" not in page
    code, page = board.get(f"/q/{other}/job/{grand.id}")
    assert f"its parent is <a href='/q/{other}/job/{mid.id}'>" in page
    code, page = board.get(f"/q/{queue}?state=waiting-children")
    assert code == 200 and root.id in page
    assert board.post(f"/q/{queue}/job/{root.id}/delete") == 409  # cancel it, never delete


def test_cancel_of_a_flow_root_cancels_its_waiting_subtree(board, conn, queue):
    from echomq.verbs import flows
    from echomq.verbs.flows import Node

    other = queue + "-kids"
    leaves = tuple(Node(other, ids.mint(), b"{}", mode="in", value=60_000) for _ in range(2))
    root = Node(queue, ids.mint(), b"{}", children=leaves)
    flows.admit(conn, root)
    assert board.post(f"/q/{queue}/job/{root.id}/cancel") == 303
    assert jobs.get(conn, queue, root.id)["state"] == "cancelled"
    assert [jobs.get(conn, other, n.id)["state"] for n in leaves] == ["cancelled"] * 2


def test_a_linked_flow_node_links_to_the_job_that_owns_its_key(board, conn, queue):
    from echomq.verbs import flows
    from echomq.verbs.flows import Node

    owner = ids.mint()
    jobs.admit(conn, queue, owner, b"{}", unique="k")
    node = Node(queue, ids.mint(), b"{}", unique="k")
    flows.admit(conn, Node(queue + "-p", ids.mint(), b"{}", children=(node,)))
    code, page = board.get(f"/q/{queue}/job/{node.id}")
    assert code == 200 and "linked</span>" in page
    assert f"Linked to <a href='/q/{queue}/job/{owner}'>" in page


def test_one_broken_queue_never_takes_the_page_down(conn, raw, queue):
    from echomq.core import keyspace
    jobs.enqueue(conn, queue, ids.mint(), b"x")
    raw.set(keyspace.queue_key(queue + "-bad", "stats"), "not a hash")  # written by hand
    raw.zadd(keyspace.queue_key(queue + "-bad", "pending"), {"JOBX": 0})
    httpd = dashboard.serve(conn, port=0, queues=[queue, queue + "-bad"])
    try:
        c = Client(httpd.server_address[1])
        code, page = c.get("/")
        assert code == 200 and f"data-queue='{queue}'" in page
        assert "could not be read" in page and "WRONGTYPE" in page
        code, text = c.get("/metrics")
        assert code == 200 and f'queue="{queue}"' in text and f'queue="{queue}-bad"' not in text
    finally:
        httpd.shutdown()
        httpd.server_close()
        # the server is shared: leave no broken queue for the tests that list every queue
        raw.delete(keyspace.queue_key(queue + "-bad", "stats"),
                   keyspace.queue_key(queue + "-bad", "pending"))


def test_registrations_pause_and_resume_buttons(board, conn, queue):
    repeat.upsert(conn, queue, "beat", template=b"t", every_ms=60_000)
    page = board.get(f"/q/{queue}/repeat")[1]
    assert f"/q/{queue}/repeat/beat/pause" in page and "/cancel" in page
    assert board.post(f"/q/{queue}/repeat/beat/pause", headers={"Origin": None}) == 403
    assert repeat.get(conn, queue, "beat")["paused"] is False
    assert board.post(f"/q/{queue}/repeat/beat/pause") == 303
    assert repeat.get(conn, queue, "beat")["paused"] is True
    page = board.get(f"/q/{queue}/repeat")[1]
    assert "paused</span>" in page and f"/q/{queue}/repeat/beat/resume" in page
    assert board.post(f"/q/{queue}/repeat/beat/resume") == 303
    assert repeat.get(conn, queue, "beat")["paused"] is False


def test_read_only_draws_no_registration_buttons_and_refuses_a_pause(conn, queue):
    repeat.upsert(conn, queue, "beat", template=b"t", every_ms=60_000)
    httpd = dashboard.serve(conn, port=0, queues=[queue], read_only=True)
    try:
        c = Client(httpd.server_address[1])
        code, page = c.get(f"/q/{queue}/repeat")
        assert code == 200 and "beat" in page and "/pause" not in page
        assert c.post(f"/q/{queue}/repeat/beat/pause") == 403
        assert repeat.get(conn, queue, "beat")["paused"] is False
    finally:
        httpd.shutdown()
        httpd.server_close()
