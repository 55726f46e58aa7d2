"""The backoff explorer draws a list of delays (``backoff=[1_000, 5_000, 30_000]``): each
retry's delay in turn, the last repeating, as a task declares it or as typed in the form."""

from __future__ import annotations

import datetime as dt

from echomq import dashboard
from echomq.tasks.app import App
from tests.support.board import Client


def test_the_explorer_draws_a_list_backoff(conn, queue):
    app = App("valkey://127.0.0.1:1")  # never connected: only its task table is read

    @app.task(queue=queue, max_attempts=5, backoff=[1_000, dt.timedelta(seconds=5), 30_000])
    def fetch(url: str) -> None: ...

    httpd = dashboard.serve(conn, port=0, tasks=app.tasks)
    try:
        c = Client(httpd.server_address[1])
        # the form: a list typed as ms or durations; 4 retries: 1 + 5 + 30 + 30 s
        code, page = c.get("/backoff?kind=list&steps=1000,5s,30s&max_attempts=5")
        assert code == 200 and "<svg class='curve'" in page
        assert "id='backoff-total'>1m 06s<" in page
        assert "<option selected>list</option>" in page
        # the task's own policy, from the tasks page's link
        code, page = c.get(f"/tasks/{fetch.queue}/{fetch.name}")  # spelt out on its page
        assert code == 200 and "[1000, 5000, 30000]" in page
        code, page = c.get(f"/backoff?task={fetch.name}")
        assert code == 200 and "own policy" in page and "[1000, 5000, 30000]" in page
        assert "value='1000,5000,30000'" in page
        # with full jitter: each delay a draw from 0 up to the list's
        code, page = c.get("/backoff?kind=list&steps=100,200&max_attempts=3&jitter=1")
        assert code == 200 and "between 0 ms and 300 ms" in page
        assert c.get("/backoff?kind=list&steps=&max_attempts=3")[0] == 400
        assert c.get("/backoff?kind=list&steps=5,soon&max_attempts=3")[0] == 400
    finally:
        httpd.shutdown()
