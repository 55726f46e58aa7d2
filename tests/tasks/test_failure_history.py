"""Failures a team can debug (issue 32): the last failure's traceback and the history of the
last failures on the job (``App(keep_errors=N)``), the failure log line with the traceback,
what ``current_job()`` says of its job across a retry and a delay, and a per-call timeout
(``task.options(timeout=)``), each run by a real worker."""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

import pytest

from echomq import App, Delay, current_job
from echomq.verbs import jobs
from echomq.verbs.status import history
from tests.support.polling import wait_for
from tests.support.workers import serving


def lookup(prices: dict[str, int], item: str) -> int:
    return prices[item]  # the frame the traceback must show, two calls below the handler


def total(items: list[str]) -> int:
    return sum(lookup({"apple": 3}, i) for i in items)


def state_of(app: App, jid: str, queue: str, state: str) -> Any:
    wait_for(lambda: (i := app.job(jid, queue=queue)) is not None and i.state == state, 20,
             f"{jid} {state}", detail=lambda: app.job(jid, queue=queue))
    return app.job(jid, queue=queue)


def test_traceback_of_a_handler_failing_two_calls_deep(url: str, queue: str, conn: Any,
                                                       caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    app = App(url)

    @app.task(queue=queue, max_attempts=2, retry_delay_ms=10)
    def price(items: list[str]) -> int:
        return total(items)

    jid = price.enqueue(["apple", "price"])
    with caplog.at_level(logging.WARNING, "echomq.consumer"), serving(app, [queue]):
        info = state_of(app, jid, queue, "dead")
    assert info.error == "KeyError: 'price'"
    tb = info.traceback
    assert tb is not None and tb.startswith("Traceback (most recent call last):")
    assert "in total" in tb and "in lookup" in tb and "return prices[item]" in tb
    # from the handler down: the runtime's own frames above it are left out
    assert tb.splitlines()[1].strip().endswith("in price") and "runner.py" not in tb
    assert tb.rstrip().endswith("KeyError: 'price'")
    # the history: both failures, oldest first, on the SERVER clock, each with its frames
    assert [e["run"] for e in info.errors] == [1, 2]
    assert all(e["error"] == "KeyError: 'price'" and "in lookup" in e["traceback"]
               for e in info.errors)
    first, last = info.errors[0]["at_ms"], info.errors[1]["at_ms"]
    assert isinstance(first, int) and first <= last
    # stamped by the transition on the SERVER clock: the death is stamped in the same call
    assert last == info.died_at_ms
    assert 0 <= jobs.server_now_ms(conn) - last < 60_000
    # one log record per failure, the traceback inside it (JSON logs keep it whole)
    dead = [r for r in caplog.records if jid in r.getMessage() and "dead after" in
            r.getMessage()]
    assert len(dead) == 1 and "in lookup" in dead[0].getMessage()
    app.close()


def test_errors_bounded_to_keep_errors(url: str, queue: str) -> None:
    app = App(url, keep_errors=3)

    @app.task(queue=queue, max_attempts=5, retry_delay_ms=10)
    def flaky() -> None:
        raise RuntimeError(f"run {current_job().runs}")

    jid = flaky.enqueue()
    with serving(app, [queue]):
        info = state_of(app, jid, queue, "dead")
    assert info.failures == 5
    assert [e["run"] for e in info.errors] == [3, 4, 5]
    assert [e["error"] for e in info.errors] == [f"RuntimeError: run {n}" for n in (3, 4, 5)]
    assert info.traceback is not None and "RuntimeError: run 5" in info.traceback
    app.close()


def test_keep_errors_zero_keeps_the_traceback_only(url: str, queue: str) -> None:
    app = App(url, keep_errors=0)

    @app.task(queue=queue, max_attempts=1)
    def once() -> None:
        raise ValueError("no")

    jid = once.enqueue()
    with serving(app, [queue]):
        info = state_of(app, jid, queue, "dead")
    assert info.errors == [] and info.traceback is not None and "ValueError: no" in (
        info.traceback)
    app.close()


def test_a_long_traceback_keeps_its_tail() -> None:
    from echomq.runtime.verdict import MAX_TRACEBACK_CHARS, formatted

    def deep(n: int) -> None:
        # distinct frames (a repeated one is folded by the formatter): a chain of causes
        if n == 0:
            raise ValueError("the first cause")
        try:
            deep(n - 1)
        except Exception as cause:
            if n == 200:
                raise LookupError("the innermost " + "x" * 50) from cause
            raise RuntimeError(f"level {n}") from cause

    try:
        deep(200)
    except LookupError as exc:
        text = formatted(exc)
    assert len(text) <= MAX_TRACEBACK_CHARS
    assert text.startswith("Traceback (most recent call last):")
    assert "characters cut" in text and text.endswith("LookupError: the innermost " + "x" * 50)


def test_history_reads_what_another_client_wrote_as_empty() -> None:
    assert history(None) == [] and history("{}") == [] and history("not json") == []
    assert history('[{"at_ms": 5, "run": 1, "error": "E: x", "traceback": ""}]') == [
        {"at_ms": 5, "run": 1, "error": "E: x", "traceback": None}]


def test_current_job_fields_across_a_retry_and_a_delay(url: str, queue: str) -> None:
    app = App(url, keep_completed=10)
    seen: list[dict[str, Any]] = []

    @app.task(queue=queue, name="steps", max_attempts=4, retry_delay_ms=10)
    def steps() -> str:
        job = current_job()
        seen.append({"runs": job.runs, "attempts": job.attempts, "failures": job.failures,
                     "delays": job.delays, "max_attempts": job.max_attempts,
                     "queue": job.queue, "task": job.task})
        if job.runs == 1:
            raise RuntimeError("first run fails")
        if job.runs == 2:
            raise Delay(10)
        return "done"

    jid = steps.enqueue()
    with serving(app, [queue]):
        state_of(app, jid, queue, "completed")
    base = {"max_attempts": 4, "queue": queue, "task": "steps"}
    assert seen == [
        {"runs": 1, "attempts": 1, "failures": 0, "delays": 0, **base},
        {"runs": 2, "attempts": 2, "failures": 1, "delays": 0, **base},
        {"runs": 3, "attempts": 3, "failures": 1, "delays": 1, **base},
    ]
    app.close()


@pytest.mark.parametrize("timeout", [0.2, dt.timedelta(milliseconds=200)])
def test_per_call_timeout(url: str, queue: str, timeout: Any) -> None:
    app = App(url, keep_completed=10)

    @app.task(queue=queue, max_attempts=1, timeout=30)
    async def slow(seconds: float) -> str:
        import asyncio
        await asyncio.sleep(seconds)
        return "slept"

    quick = slow.options(timeout=timeout)
    assert slow.call_timeout_ms is None  # the task itself keeps its own
    cut = quick.enqueue(2.0)
    fine = slow.enqueue(0.3)  # the task's 30 s applies: it completes
    started = time.monotonic()
    with serving(app, [queue]):
        info = state_of(app, cut, queue, "dead")
        state_of(app, fine, queue, "completed")
    assert info.error == "TimeoutError: job exceeded its timeout of 0.2 s"
    assert time.monotonic() - started < 10
    app.close()


def test_per_call_timeout_is_checked() -> None:
    app = App("valkey://127.0.0.1:1")

    @app.task
    def f() -> None: ...

    with pytest.raises(ValueError):
        f.options(timeout=0)
    with pytest.raises(TypeError):
        f.options(timeout="5s")  # type: ignore[arg-type]


def test_echomq_job_prints_the_traceback_and_json_has_the_history(url: str, queue: str
                                                                  ) -> None:
    import json

    from tests.support.cli import echomq

    app = App(url)

    @app.task(queue=queue, max_attempts=2, retry_delay_ms=10)
    def price(items: list[str]) -> int:
        return total(items)

    jid = price.enqueue(["nope"])
    with serving(app, [queue]):
        state_of(app, jid, queue, "dead")
    app.close()
    shown = echomq("job", jid, url=url)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "failures  the last 2 kept" in out
    tail = out.split("traceback (the last failure's):\n", 1)[1]
    assert "in lookup" in tail and tail.rstrip().endswith("KeyError: 'nope'")
    got = json.loads(echomq("job", jid, "--json", url=url).stdout)
    assert got["traceback"].rstrip().endswith("KeyError: 'nope'")
    assert [(e["run"], e["error"]) for e in got["errors"]] == [(1, "KeyError: 'nope'"),
                                                              (2, "KeyError: 'nope'")]
    assert all(isinstance(e["at_ms"], int) and "in lookup" in e["traceback"]
               for e in got["errors"])


def child_price(item: str) -> int:
    return total([item])  # run in a child process: its frames cross back as text


@pytest.mark.slow
def test_a_child_process_failure_keeps_the_childs_traceback(url: str, queue: str) -> None:
    app = App(url)
    task = app.task(queue=queue, max_attempts=1, isolation="process")(child_price)
    jid = task.enqueue("plum")
    with serving(app, [queue]):
        info = state_of(app, jid, queue, "dead")
    assert info.error == "KeyError: 'plum'"
    tb = info.traceback
    assert tb is not None and "in child_price" in tb and "in lookup" in tb
    assert tb.splitlines()[1].strip().endswith("in child_price")  # the child's runtime left out
    assert tb.rstrip().endswith("KeyError: 'plum'")
    app.close()


def test_keep_errors_is_the_retentions() -> None:
    from echomq.verbs.retention import Retention

    assert App("valkey://127.0.0.1:1").retention.keep_errors == 10
    assert App("valkey://127.0.0.1:1", keep_errors=2).retention.keep_errors == 2
    own = App("valkey://127.0.0.1:1", retention=Retention(keep_errors=4))
    assert own.retention.keep_errors == 4
    with pytest.raises(ValueError):
        App("valkey://127.0.0.1:1", keep_errors=-1)
