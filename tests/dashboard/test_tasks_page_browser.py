"""The Tasks page in a real browser at 1400 px (issue 32): it fits the window (options
summarised on the list, spelt out on the task's page), a group computed by a function is
named, an interval is listed under "every" (not "cron"), ``retry_on`` and ``expires``
are shown. Playwright drives Debian's chromium, as ``test_dashboard_browser`` does."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from echomq import App, dashboard
from tests.support.browser import chromium

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


def tenant_of(order: dict) -> str:
    return str(order["tenant"])


def test_the_tasks_page_fits_1400_px_and_says_every_option(browser, url, conn, queue):
    with App(url) as app:
        @app.task(queue=queue, name="billing.charge_the_customer_for_the_monthly_plan",
                  max_attempts=7, backoff=[1_000, 5_000, 30_000, 120_000], timeout=30,
                  keep_result=3600, retry_on=(TimeoutError, ConnectionError),
                  expires=dt.timedelta(minutes=10), rate="10/s", group=tenant_of)
        def charge(order: dict) -> None: ...

        @app.every(dt.timedelta(minutes=5))
        @app.task(queue=queue, name="ops.heartbeat_of_the_whole_fleet")
        def heartbeat() -> None: ...

        @app.cron("30 8 * * 1-5", tz="Europe/Paris")
        @app.task(queue=queue, name="mail.digest")
        def digest() -> None: ...

        httpd = dashboard.serve(conn, port=0, queues=[queue], tasks=app.tasks)
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        page = ctx.new_page()
        try:
            base = f"http://127.0.0.1:{httpd.server_address[1]}"
            page.goto(f"{base}/tasks")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 1400, f"the Tasks page is {width} px wide"
            row = page.locator(
                "tr[data-task='billing.charge_the_customer_for_the_monthly_plan']")
            text = row.inner_text()
            assert "7 attempts" in text and "by tenant_of(...)" in text
            assert "TimeoutError, ConnectionError" in text and "10m 00s after admission" in text
            assert "<function>" not in page.content()
            beat = page.locator("tr[data-task='ops.heartbeat_of_the_whole_fleet']").inner_text()
            assert "every" in beat and "cron" not in beat
            page.goto(f"{base}/tasks/{queue}/billing.charge_the_customer_for_the_monthly_plan")
            detail = page.locator("table.opts").inner_text()
            assert "retry_on" in detail and "expires" in detail and "backoff" in detail
            assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        finally:
            ctx.close()
            httpd.shutdown()
