"""The dashboard in a real browser: Playwright driving Debian's chromium (never a browser
Playwright downloads) against a real Valkey with seeded jobs.

Every page renders without a script or CSP error and is saved as a screenshot under
``artifacts/dashboard/`` (``$ECHOMQ_ARTIFACTS`` to move it); the schedule clock's "now" is
dragged and the release count checked against the seeded run-ats; a dead job is retried
from the UI and shows pending; live counts arrive over SSE; a restarted dashboard is
reconnected to; pages read the same with scripts off.
"""

from __future__ import annotations

import math
import os
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import dashboard
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import flows, groups, jobs, metrics, repeat, taskmetrics, workers
from tests.support.paths import ROOT

CHROMIUM = os.environ.get("ECHOMQ_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--disable-dev-shm-usage"]
ARTIFACTS = pathlib.Path(os.environ.get(
    "ECHOMQ_ARTIFACTS", ROOT / "artifacts"
)) / "dashboard"

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

# a real browser: seconds per page, so outside the fast loop (-m 'not slow')
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


class Site:
    def __init__(self, conn: Any, queues: list[str]) -> None:
        self.conn, self.queues = conn, queues
        self.httpd = dashboard.serve(conn, port=0, queues=queues)
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def restart(self) -> None:
        self.httpd = dashboard.serve(self.conn, port=self.port, queues=self.queues)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def site(conn, queue) -> Iterator[Site]:
    s = Site(conn, [queue, queue + "-empty"])
    yield s
    s.stop()


def open_page(browser: Browser, js: bool = True) -> tuple[Page, list[str]]:
    ctx = browser.new_context(viewport={"width": 1360, "height": 860}, java_script_enabled=js,
                              timezone_id="America/New_York")
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    return page, problems


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def seed(conn: Any, queue: str, raw: Any = None) -> dict[str, Any]:
    """A queue a person would look at: tasks of several kinds in every state (and, given
    ``raw``, an hour of per-minute throughput in the day's ring ``metrics.observe``
    keeps)."""
    out: dict[str, Any] = {"dead": [], "soon": []}
    if raw is not None:
        minute = jobs.server_now_ms(conn) // 60_000
        ring: dict[str, int] = {}
        for back in range(1, 60):
            m = minute - back
            ring[f"{m % 1440}:t"] = m
            ring[f"{m % 1440}:c"] = 40 + int(25 * math.sin(m / 6)) + (m * 7) % 11
            ring[f"{m % 1440}:f"] = (m * 5) % 7 // 3 + (4 if m % 17 == 0 else 0)
        raw.hset(keyspace.queue_key(queue, "series"), mapping=ring)
    for err in ("TimeoutError: upstream took 30 s", "ValueError: no such invoice 42"):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, encode("invoice.charge", [42], {"cents": 1999}))
        c = jobs.claim(conn, queue, 10_000)
        assert c is not None and c.id == jid
        jobs.retry(conn, queue, jid, c.token, 0, 1, err)
        out["dead"].append(jid)
    for i in range(3):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, encode("thumbs.resize", [f"img{i}.png"], {"w": 256}))
        c = jobs.claim(conn, queue, 10_000)
        assert c is not None and c.id == jid
        jobs.ack(conn, queue, jid, c.token, keep=True)
    jobs.enqueue(conn, queue, ids.mint(), encode("video.encode", ["talk.mp4"], {}))
    assert jobs.claim(conn, queue, 600_000) is not None  # one running
    jobs.enqueue_many(conn, queue, [
        (ids.mint(), encode("mail.send", [f"user{i}@example.com"], {"template": "welcome"}))
        for i in range(12)])
    now = jobs.server_now_ms(conn)
    out["now"] = now
    for i in range(6):
        jid = ids.mint()
        jobs.enqueue_at(conn, queue, jid, encode("report.build", [2024, i], {}),
                        now + 10_000 * (i + 1))
        out["soon"].append(jid)
    for tenant, n in (("acme", 4), ("globex", 2), ("initech", 1)):
        for i in range(n):
            jobs.enqueue(conn, queue, ids.mint(), encode("sync.tenant", [tenant, i], {}),
                         group=tenant)
    groups.set_limit(conn, queue, "acme", 2)
    groups.set_rate(conn, queue, "globex", 100, 60_000)
    groups.pause(conn, queue, "initech")
    from echomq.verbs.flows import Node

    parts = tuple(Node(queue, ids.mint(), encode("video.encode", [f"part{i}.mp4"], {}))
                  for i in range(3))
    thumbs = Node(queue, ids.mint(), encode("thumbs.make", ["talk.mp4"], {}), children=parts)
    out["flow"] = Node(queue, ids.mint(), encode("video.publish", ["talk"], {}),
                       children=(thumbs, Node(queue, ids.mint(),
                                              encode("captions.write", ["talk"], {}))))
    flows.admit(conn, out["flow"])
    metrics.observe(conn, queue, [0.012, 0.3, 0.05] * 20, completed=55, failed=5)
    repeat.register(conn, queue, "heartbeat", 60_000, encode("ops.ping", [], {}), 5_000)
    repeat.register_cron(conn, queue, "daily-digest", "30 8 * * 1-5",
                         encode("mail.digest", [], {}), tz="Europe/Paris")
    return out


def test_every_page_renders_and_is_saved(browser, site, conn, raw, queue):
    data = seed(conn, queue, raw)
    page, problems = open_page(browser)
    page.goto(site.base + "/")
    expect(page.locator("tr[data-queue]")).to_have_count(2)
    expect(page.locator(f"tr[data-queue='{queue}-empty']")).to_be_visible()
    expect(page.locator("#server-clock")).to_contain_text("UTC")
    expect(page.locator("#skew")).not_to_be_empty()
    shot(page, "overview")
    for state in ("pending", "scheduled", "active", "completed", "dead", "cancelled"):
        page.goto(f"{site.base}/q/{queue}?state={state}")
        expect(page.locator("h1")).to_contain_text(state)
        shot(page, f"queue-{state}")
    page.goto(f"{site.base}/q/{queue}?state=scheduled")
    expect(page.locator("td", has_text="report.build").first).to_be_visible()
    expect(page.locator(".rel").first).to_contain_text("in ")
    page.goto(f"{site.base}/q/{queue}/job/{data['soon'][0]}")
    expect(page.locator("pre.payload")).to_contain_text('"task": "report.build"')
    expect(page.locator(".local").first).to_contain_text("America/New_York")
    shot(page, "job")
    page.goto(f"{site.base}/q/{queue}/job/{data['dead'][1]}")
    expect(page.locator("pre.error")).to_contain_text("no such invoice")
    shot(page, "job-dead")
    page.goto(f"{site.base}/q/{queue}/job/{data['flow'].id}")
    expect(page.locator("ul.tree li")).to_have_count(6)
    shot(page, "job-flow")
    page.goto(f"{site.base}/q/{queue}/clock")
    expect(page.locator("#clock")).to_be_visible()
    shot(page, "clock")
    page.goto(f"{site.base}/q/{queue}/repeat")
    expect(page.locator("ol.runs").nth(1).locator("li")).to_have_count(5)
    shot(page, "registrations")
    page.goto(f"{site.base}/q/{queue}/groups")
    expect(page.locator("tr[data-group]")).to_have_count(3)
    shot(page, "groups")
    page.goto(f"{site.base}/backoff?kind=exponential&base=1000&cap=300000&max_attempts=12")
    expect(page.locator("#backoff-total")).to_have_text("18m 31s")  # 511 s + 2 x 300 s
    shot(page, "backoff")
    page.goto(f"{site.base}/backoff?kind=exponential&base=1000&cap=60000&max_attempts=10"
              "&jitter=1")
    shot(page, "backoff-jitter")
    resp = page.goto(site.base + "/metrics")
    assert resp is not None and "echomq_jobs{" in resp.text()
    assert problems == [], problems


def seed_operations(conn: Any, queue: str) -> dict[str, Any]:
    """A day of per-task metrics (three tasks, a bad hour for one) and a live worker with
    two jobs running, registered through the registry's own verbs."""
    now = jobs.server_now_ms(conn)
    codes = taskmetrics.CODES
    for back in range(0, 1440, 4):
        at = now - back * 60_000
        wave = 20 + int(15 * math.sin(back / 90))
        day: dict[str, list[int]] = {}
        for task, ok, bad, bucket in (("mail.send", wave, 1 if back % 40 == 0 else 0, 3),
                                      ("thumbs.resize", wave // 2, 0, 5),
                                      ("invoice.charge", 6, 4 if 120 < back < 200 else 0, 7)):
            slots = taskmetrics.empty()
            slots[codes.index("c")] = ok
            slots[codes.index("r")] = bad
            slots[codes.index(f"h{bucket}")] = ok + bad - 1
            slots[codes.index(f"h{bucket + 2}")] = 1
            slots[codes.index("s")] = (ok + bad) * 40_000 * bucket
            day[task] = slots
        taskmetrics.record(conn, queue, day, at)
    from echomq.verbs import declarations

    declarations.declare(conn, queue, {
        "mail.send": {"timeout_ms": 30_000, "max_attempts": 5,
                      "backoff": ["exponential", 1000, 60000], "keep_result_ms": 600_000},
        "invoice.charge": {"max_attempts": 3, "group": "tenant", "rate": "10/s"}})
    reg = workers.Registration(
        id="w-" + ids.mint()[-8:].lower(), host="web-1", pid=4242, app="shop.tasks:app",
        queues=(queue,), concurrency=8, wire=6, version="0.9", heartbeat_ms=30_000,
        tasks={queue: ["mail.send", "thumbs.resize", "invoice.charge"]})
    workers.register(conn, reg)
    running = [workers.Running(ids.mint(), queue, "mail.send", now - 2_500, 1),
               workers.Running(ids.mint(), queue, "invoice.charge", now - 95_000, 3)]
    workers.heartbeat(conn, reg.id, reg.heartbeat_ms, running)
    return {"worker": reg, "running": running}


def test_operating_pages_in_the_browser(browser, site, conn, queue):
    data = seed_operations(conn, queue)
    reg = data["worker"]
    try:
        page, problems = open_page(browser)
        page.goto(site.base + "/tasks")
        expect(page.locator("tr[data-task]")).to_have_count(3)
        row = page.locator("tr[data-task='invoice.charge']")
        expect(row.locator("td.day.fail")).not_to_have_text("0.0%")
        expect(row.locator("svg.spark").first).to_be_visible()
        shot(page, "tasks")
        page.locator("form.tasksearch input[name=q]").fill("MAIL")
        page.locator("form.tasksearch button").click()
        expect(page.locator("tr[data-task]")).to_have_count(1)
        page.locator("tr[data-task='mail.send'] a").first.click()
        expect(page.locator("h1")).to_have_text("mail.send")
        expect(page.locator("svg.taskchart")).to_have_count(2)
        expect(page.locator("#chart-day svg.taskchart rect.okbar")).to_have_count(48)
        shot(page, "task")
        page.goto(site.base + "/busy")
        expect(page.locator("tr[data-job]")).to_have_count(2)
        first = page.locator("tr[data-job]").first  # the longest running first
        expect(first).to_contain_text("invoice.charge")
        expect(first.locator("td.runtime")).to_contain_text("1m")
        shot(page, "busy")
        page.goto(site.base + "/workers")
        expect(page.locator(f"tr[data-worker='{reg.id}'] td.busy")).to_have_text("2 / 8")
        shot(page, "workers")
        page.once("dialog", lambda d: d.accept())
        page.locator(f"tr[data-worker='{reg.id}'] button", has_text="quiet").click()
        expect(page.locator(f"tr[data-worker='{reg.id}']")).to_contain_text("asked: quiet")
        assert next(w for w in workers.live(conn) if w.id == reg.id).requested == "quiet"
        assert problems == [], problems
    finally:
        workers.unregister(conn, reg.id)


def drag_to(page: Page, at_ms: int) -> None:
    svg = page.locator("#clock")
    box = svg.bounding_box()
    assert box is not None
    start, end = int(svg.get_attribute("data-start")), int(svg.get_attribute("data-end"))
    width = float(svg.get_attribute("width"))
    scale = box["width"] / width

    def client_x(ms: int) -> float:
        return box["x"] + (10 + (ms - start) / (end - start) * (width - 20)) * scale

    handle = page.locator("#handle circle").bounding_box()
    assert handle is not None
    page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
    page.mouse.down()
    for frac in (0.3, 0.6, 1.0):  # a real drag: several moves on the way
        x0 = handle["x"] + handle["width"] / 2
        page.mouse.move(x0 + (client_x(at_ms) - x0) * frac, handle["y"])
    page.mouse.up()


def test_drag_the_schedule_clock(browser, site, conn, queue):
    now = jobs.server_now_ms(conn)
    soon = [ids.mint() for _ in range(6)]
    for i, jid in enumerate(soon):
        jobs.enqueue_at(conn, queue, jid, encode("report.build", [i], {}), now + 10_000 * (i + 1))
    page, problems = open_page(browser)
    page.goto(f"{site.base}/q/{queue}/clock")
    expect(page.locator("#release-count")).to_have_text("0")
    drag_to(page, now + 35_000)  # between the 3rd (+30 s) and the 4th (+40 s)
    count = page.locator("#release-count:not([data-pending])")
    expect(count).to_have_text("3", timeout=10_000)
    at = int(page.locator("#clock").get_attribute("data-at"))
    assert now + 30_000 <= at < now + 40_000
    assert int(count.get_attribute("data-at")) == at
    expect(page.locator("#release-list li")).to_have_count(3)
    shot(page, "clock-dragged")
    for jid in soon[:3]:
        expect(page.locator("#release-list")).to_contain_text(jid)
    drag_to(page, now + 65_000)
    expect(page.locator("#release-count:not([data-pending])")).to_have_text("6",
                                                                           timeout=10_000)
    page.locator("#handle").focus()
    page.keyboard.press("ArrowLeft")  # the handle moves by keyboard too
    expect(page.locator("#release-count:not([data-pending])")).not_to_have_text("")
    assert problems == [], problems


def test_retry_a_dead_job_from_the_ui(browser, site, conn, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("invoice.charge", [7], {}))
    c = jobs.claim(conn, queue, 10_000)
    assert c is not None
    jobs.retry(conn, queue, jid, c.token, 0, 1, "ValueError: card declined")
    page, problems = open_page(browser)
    page.goto(f"{site.base}/q/{queue}?state=dead")
    page.locator(f"a:has-text('{jid}')").click()
    expect(page.locator(".badge.dead")).to_be_visible()
    page.locator("button", has_text="retry").click()
    expect(page.locator("table.facts .badge")).to_have_text("pending")
    assert jobs.get(conn, queue, jid)["state"] == "pending"
    assert problems == [], problems


def test_cancel_a_scheduled_job_from_the_ui(browser, site, conn, queue):
    jid = ids.mint()
    jobs.enqueue_in(conn, queue, jid, encode("report.build", [1], {}), 3_600_000)
    page, problems = open_page(browser)
    page.on("dialog", lambda d: d.accept())
    page.goto(f"{site.base}/q/{queue}?state=scheduled")
    page.locator(f"a:has-text('{jid}')").click()
    expect(page.locator("table.facts .badge")).to_have_text("scheduled")
    page.locator("button", has_text="cancel").click()
    expect(page.locator("table.facts .badge")).to_have_text("cancelled")
    assert jobs.get(conn, queue, jid)["state"] == "cancelled"
    counts = jobs.counts(conn, queue)
    assert counts["scheduled"] == 0 and counts["cancelled"] == 1
    shot(page, "job-cancelled")
    assert problems == [], problems


def test_bulk_retry_asks_in_the_browser(browser, site, conn, queue):
    dead_ids = []
    for _ in range(3):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, encode("x.y", [], {}))
        c = jobs.claim(conn, queue, 10_000)
        assert c is not None
        jobs.retry(conn, queue, jid, c.token, 0, 1, "boom")
        dead_ids.append(jid)
    page, problems = open_page(browser)
    page.goto(f"{site.base}/q/{queue}?state=dead")
    asked: list[str] = []

    def answer(d: Any) -> None:
        asked.append(d.message)
        d.accept()

    page.on("dialog", answer)
    for jid in dead_ids[:2]:
        page.locator(f"input[value='{jid}']").check()
    page.locator("button", has_text="retry chosen").click()
    expect(page.locator("p.ok")).to_contain_text("retry: 2 job(s)")
    assert asked and "chosen dead jobs" in asked[0]
    assert [jobs.get(conn, queue, j)["state"] for j in dead_ids] == ["pending", "pending", "dead"]
    assert problems == [], problems


def test_live_counts_and_reconnect_after_a_restart(browser, site, conn, queue):
    page, problems = open_page(browser)
    page.goto(site.base + "/")
    cell = page.locator(f"a.count[data-q='{queue}'][data-k='pending']")
    expect(cell).to_have_text("0")
    jobs.enqueue(conn, queue, ids.mint(), b"x")
    expect(cell).to_have_text("1", timeout=10_000)  # over SSE, no reload
    c = jobs.claim(conn, queue, 10_000)
    assert c is not None
    jobs.retry(conn, queue, c.id, c.token, 0, 1, "boom")
    toast = page.locator(".toast")
    expect(toast).to_have_text(f"1 new dead job on {queue}", timeout=10_000)
    assert toast.get_attribute("href") == f"/q/{queue}?state=dead"
    site.stop()
    banner = page.locator("#banner")
    expect(banner).to_be_visible(timeout=15_000)
    expect(banner).to_contain_text("reconnecting")
    shot(page, "banner")
    site.restart()
    jobs.enqueue(conn, queue, ids.mint(), b"x")
    expect(banner).to_be_hidden(timeout=20_000)
    expect(cell).to_have_text("1", timeout=10_000)
    # the lost stream logs one network error in the console; nothing else may
    assert all("events" in p or "ERR_" in p for p in problems), problems


def test_pages_read_the_same_without_scripts(browser, site, conn, queue):
    now = jobs.server_now_ms(conn)
    for i in range(4):
        jobs.enqueue_at(conn, queue, ids.mint(), b"x", now + 10_000 * (i + 1))
    page, _ = open_page(browser, js=False)
    page.goto(site.base + "/")
    expect(page.locator(f"a.count[data-q='{queue}'][data-k='scheduled']")).to_have_text("4")
    page.goto(f"{site.base}/q/{queue}/clock")
    page.locator("form.nojs input[name=at]").fill(str(now + 25_000))
    page.locator("form.nojs button").click()
    expect(page.locator("#release-count")).to_have_text("2")
    shot(page, "clock-nojs")


def test_readme_images_are_current() -> None:
    """The dashboard page's three screenshots (docs/img) exist and are small (after a visual
    change, copy ``overview``, ``clock-dragged`` and ``backoff`` from ``artifacts/dashboard/``)."""
    root = ROOT / "docs" / "img"
    for name in ("dashboard-overview.png", "dashboard-clock.png", "dashboard-backoff.png"):
        f = root / name
        assert f.exists() and f.stat().st_size < 400_000, name


def teardown_module() -> None:
    # keep the artifacts; drop an empty dir a failed launch may have left
    if ARTIFACTS.exists() and not any(ARTIFACTS.iterdir()):
        shutil.rmtree(ARTIFACTS)

