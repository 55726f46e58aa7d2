"""Per-task metrics counted by a real worker (``runtime.taskstats``): every outcome lands
on the server under its task, the histogram counts every run, the worker writes a few
commands a second rather than one per job, and ``task_metrics=False`` writes none."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from echomq import App
from echomq.verbs import taskmetrics
from tests.support.polling import wait_for
from tests.support.workers import serving

pytestmark = pytest.mark.slow  # a worker runs for a few seconds


def _app(url: str, queue: str) -> App:
    app = App(url)
    release = threading.Event()

    @app.task(queue=queue, name="ok")
    def ok(n: int) -> int:
        time.sleep(0.02 if n == 0 else 0)
        return n

    @app.task(queue=queue, name="flaky", max_attempts=2, retry_delay_ms=0)
    def flaky() -> None:
        raise ValueError("always")

    @app.task(queue=queue, name="slow", max_attempts=2, retry_delay_ms=0, timeout=0.1)
    async def slow() -> None:
        await asyncio.sleep(5)

    @app.task(queue=queue, name="waits", lease_ms=600)
    async def waits() -> None:
        while not release.is_set():
            await asyncio.sleep(0.02)

    app.release = release  # type: ignore[attr-defined]
    return app


def test_every_outcome_is_counted_under_its_task(url, conn, queue):
    app = _app(url, queue)
    with serving(app, [queue], beat_ms=50):
        for n in range(5):
            app.enqueue("ok", n)
        app.enqueue("flaky")
        app.enqueue("slow")
        jid = app.enqueue("waits")
        wait_for(lambda: app.job(jid).state == "active", 10, "waits running")
        assert app.cancel(jid) == "requested"

        def settled() -> dict[str, taskmetrics.Tally] | None:
            t = taskmetrics.totals(conn, queue)
            want = {"ok": 5, "flaky": 2, "slow": 2, "waits": 1}
            return t if {k: v.total for k, v in t.items()} == want else None

        got = wait_for(settled, 15, "every run counted",
                       detail=lambda: repr(taskmetrics.totals(conn, queue)))
    zero = dict.fromkeys(taskmetrics.OUTCOMES, 0)
    assert got["ok"].runs == {**zero, "completed": 5}
    assert got["flaky"].runs == {**zero, "retried": 1, "dead": 1}
    assert got["slow"].runs == {**zero, "timed_out": 1, "dead": 1}
    assert got["waits"].runs == {**zero, "cancelled": 1}
    for t in got.values():  # the histogram counts every run, with its time
        assert t.count == t.total
    assert got["ok"].sum_s >= 0.02
    assert got["slow"].sum_s >= 0.2 and got["slow"].buckets[taskmetrics.bucket_of(0.15)] == 2
    hist = taskmetrics.history(conn, queue, ["ok", "slow"], 5)
    assert hist["ok"].span(5).runs["completed"] == 5
    assert hist["slow"].span(5).failures == 2


def _flushes(raw) -> int:
    """EXPIREAT calls: one per task per flush (``taskmetrics.record``; nothing else on the
    server sends it, while the transitions' own counters HINCRBY once per job)."""
    return int(raw.info("commandstats").get("cmdstat_expireat", {}).get("calls", 0))


def test_counts_are_flushed_not_written_per_job(url, raw, conn, queue):
    app = _app(url, queue)
    n = 600
    with serving(app, [queue], beat_ms=50):
        before = _flushes(raw)
        started = time.monotonic()
        for i in range(n):
            app.enqueue("ok", i + 1)
        wait_for(lambda: taskmetrics.totals(conn, queue).get("ok") and
                 taskmetrics.totals(conn, queue)["ok"].total == n, 20, "all counted")
        flushes = _flushes(raw) - before
        took = time.monotonic() - started
    # one flush a second at most (and one at the end), not a write per job
    assert 1 <= flushes <= took + 2, (flushes, took)


def test_off_writes_no_task_metrics(url, raw, conn, queue):
    app = _app(url, queue)
    with serving(app, [queue], beat_ms=50, task_metrics=False) as worker:
        for i in range(20):
            app.enqueue("ok", i + 1)
        wait_for(lambda: sum(c.stats.completed for c in worker.consumers) == 20, 10, "done")
        time.sleep(1.2)  # past a flush interval
    assert taskmetrics.totals(conn, queue) == {}
    assert raw.keys(taskmetrics.totals_key(queue) + "*") == []
