"""Durable steps through the task API and a worker in the test's process (DESIGN §3h):
``current_job().step / sleep / wait_for``, ``app.signal``, ``app.job(id).steps``; sync and
async handlers; a failure after step k retries from the top and steps 1..k replay; a
repeated step name raises ``ValueError``; a wait's timeout raises ``SignalTimeout``;
cancel stops a waiting job; a workflow as a flow's child."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections import Counter
from typing import Any

import pytest

from echomq import errors
from echomq.runtime.handler import current_job
from echomq.tasks.app import App
from echomq.verbs import durable, jobs
from tests.support.polling import wait_for
from tests.support.workers import Recorder, serving


class Calls:
    """How many times each step function ran (a step function runs at least once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.n: Counter[str] = Counter()

    def __call__(self, name: str, value: Any = None) -> Any:
        with self.lock:
            self.n[name] += 1
        return value


def test_sync_steps_replay_after_a_failure_and_list_in_order(app: App, queue: str) -> None:
    calls = Calls()
    failed = threading.Event()

    @app.task(queue=queue, keep_result=60, retry_delay_ms=10)
    def work(x: int) -> list[Any]:
        job = current_job()
        a = job.step("one", calls, "one", (x, "tuple"))  # JSON: the tuple comes back a list
        b = job.step("two", calls, "two", {"k": x + 1})
        if not failed.is_set():
            failed.set()
            raise RuntimeError("after step two")
        c = job.step("three", calls, "three", x + 2)
        return [a, b, c]

    jid = work.enqueue(1)
    with serving(app, [queue]):
        assert app.result(jid, timeout=10) == [[1, "tuple"], {"k": 2}, 3]
    # steps one and two ran once: the retry replayed their recorded results
    assert calls.n == Counter({"one": 1, "two": 1, "three": 1})


def test_async_steps_and_their_listing(url: str, queue: str) -> None:
    app = App(url, keep_completed=10)
    calls = Calls()

    async def fetch(x: int) -> int:
        return calls("fetch", x * 10)

    @app.task(queue=queue)
    async def work(x: int) -> int:
        job = current_job()
        got: int = await job.step("fetch", fetch, x)
        more: int = await job.step("double", calls, "double", got * 2)
        return more

    jid = work.enqueue(2)
    with serving(app, [queue]):
        wait_for(lambda: (i := app.job(jid)) is not None and i.state == "completed", 10)
    info = app.job(jid)
    assert info is not None
    assert [(s["name"], s["state"]) for s in info.steps] == [("fetch", "done"),
                                                            ("double", "done")]
    assert all(isinstance(s["at_ms"], int) for s in info.steps)
    assert info.steps[0]["at_ms"] <= info.steps[1]["at_ms"]
    assert calls.n == Counter({"fetch": 1, "double": 1})
    app.close()


def test_a_step_name_used_twice_in_a_run_raises_value_error(app: App, queue: str) -> None:
    seen: list[str] = []

    @app.task(queue=queue, max_attempts=1)
    def work() -> None:
        job = current_job()
        job.step("same", lambda: 1)
        try:
            job.step("same", lambda: 2)
        except ValueError as exc:
            seen.append(str(exc))

    work.enqueue()
    with serving(app, [queue]):
        wait_for(lambda: bool(seen), 10)
    assert "used twice" in seen[0]


def test_a_sleep_leaves_the_slot_and_resumes_without_spending_an_attempt(
        app: App, queue: str) -> None:
    calls = Calls()
    events = Recorder()

    @app.task(queue=queue, keep_result=60, max_attempts=1)
    def work() -> str:
        job = current_job()
        job.step("before", calls, "before")
        job.sleep("nap", dt.timedelta(milliseconds=300))
        job.step("after", calls, "after")
        return "woke"

    jid = work.enqueue()
    with serving(app, [queue], on_event=events):
        wait_for(lambda: (i := app.job(jid)) is not None and i.state == "scheduled", 10)
        info = app.job(jid)
        assert info is not None
        assert [s["state"] for s in info.steps] == ["done", "sleeping"]
        assert app.result(jid, timeout=10) == "woke"  # max_attempts=1: no attempt spent
    assert "suspended" in events.kinds(jid)
    assert calls.n == Counter({"before": 1, "after": 1})


def test_wait_for_resumes_with_the_signal_payload(app: App, queue: str) -> None:
    @app.task(queue=queue, keep_result=60)
    async def work(key: str) -> Any:
        return await current_job().wait_for(key, timeout=dt.timedelta(minutes=5))

    key = f"approval:{queue}"
    jid = work.enqueue(key)
    with serving(app, [queue]):
        wait_for(lambda: (i := app.job(jid)) is not None and i.state == "waiting", 10)
        info = app.job(jid)
        assert info is not None and info.waiting_on is not None and key in info.waiting_on
        assert app.signal(key, {"ok": True}) == 1
        assert app.result(jid, timeout=10) == {"ok": True}
        # a signal sent before the wait began is kept and taken at once
        assert app.signal(key + ":early", [1, 2]) == 0
        assert app.result(work.enqueue(key + ":early"), timeout=10) == [1, 2]


def test_a_wait_that_times_out_raises_signal_timeout(app: App, queue: str) -> None:
    caught: list[errors.SignalTimeout] = []

    @app.task(queue=queue, keep_result=60)
    def work(key: str) -> str:
        try:
            current_job().wait_for(key, timeout=0.2, name="approval")
        except errors.SignalTimeout as exc:
            caught.append(exc)
            return "timed out"
        return "signalled"

    key = f"never:{queue}"
    jid = work.enqueue(key)
    with serving(app, [queue]):
        assert app.result(jid, timeout=10) == "timed out"
    assert caught[0].key == key and caught[0].step == "approval"
    assert isinstance(caught[0].at_ms, int)


def test_cancel_stops_a_waiting_job(app: App, queue: str) -> None:
    @app.task(queue=queue)
    def work(key: str) -> Any:
        return current_job().wait_for(key)

    jid = work.enqueue(f"cancel:{queue}")
    with serving(app, [queue]):
        wait_for(lambda: (i := app.job(jid)) is not None and i.state == "waiting", 10)
        assert str(app.cancel(jid)) == "cancelled"
        with pytest.raises(errors.JobCancelled):
            app.result(jid, timeout=10)
    info = app.job(jid)
    assert info is not None and info.steps[0]["state"] == "cancelled"


def test_a_workflow_is_a_flow_child(app: App, queue: str) -> None:
    @app.task(queue=queue, keep_result=60)
    def child(key: str) -> Any:
        return current_job().wait_for(key)

    @app.task(queue=queue, keep_result=60)
    def parent() -> list[Any]:
        return [c.value for c in current_job().children()]

    key = f"flow:{queue}"
    pid = app.flow(parent.s(), children=[child.s(key)])
    with serving(app, [queue]):
        # sent before or after the child parks: kept either way, so the child resumes
        assert app.signal(key, "go") in (0, 1)
        assert app.result(pid, timeout=10) == ["go"]


def test_cancel_stops_a_sleeping_job(app: App, queue: str) -> None:
    @app.task(queue=queue)
    async def work() -> None:
        await current_job().sleep("long", dt.timedelta(hours=1))

    jid = work.enqueue()
    with serving(app, [queue]):
        wait_for(lambda: (i := app.job(jid)) is not None and bool(i.steps), 10)
        assert str(app.cancel(jid)) == "cancelled"
    info = app.job(jid)
    assert info is not None and info.state == "cancelled"
    assert info.steps == [{"name": "long", "state": "cancelled", "at_ms": info.steps[0]["at_ms"]}]


def test_a_workflow_is_a_flow_parent(app: App, queue: str) -> None:
    calls = Calls()

    @app.task(queue=queue, keep_result=60)
    def child(n: int) -> int:
        return n

    @app.task(queue=queue, keep_result=60)
    def parent() -> int:
        job = current_job()
        total: int = job.step("sum", calls, "sum", sum(c.value for c in job.children()))
        job.sleep("settle", 50)
        return total

    pid = app.flow(parent.s(), children=[child.s(n) for n in (1, 2, 3)])
    with serving(app, [queue]):
        assert app.result(pid, timeout=10) == 6
    assert calls.n == Counter({"sum": 1})


def test_a_wait_timeout_and_a_sleep_wake_without_waiting_for_a_beat(
        app: App, queue: str) -> None:
    # a 2 s beat: a wake left to the next beat would land ~2 s late; measured on the SERVER
    # clock from the step's own wake instant to the re-run passing it
    late: dict[str, int] = {}

    @app.task(queue=queue)
    def nap(kind: str) -> None:
        job = current_job()
        if kind == "sleep":
            job.sleep("nap", 300)
        else:
            with contextlib.suppress(errors.SignalTimeout):
                job.wait_for(f"never:{job.id}", timeout=0.3, name="nap")
        conn = app.connector()
        step = next(s for s in durable.steps(conn, queue, job.id) if s.name == "nap")
        wake = step.until_ms if step.until_ms is not None else step.at_ms
        assert wake is not None
        late[kind] = jobs.server_now_ms(conn) - wake

    with serving(app, [queue], beat_ms=2_000):
        nap.enqueue("sleep")
        nap.enqueue("wait")
        wait_for(lambda: len(late) == 2, 15)
    assert late["sleep"] < 600 and late["wait"] < 600, late
