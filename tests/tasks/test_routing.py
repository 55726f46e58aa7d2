"""The router's per-task plan (``tasks.routing``): a plain job runs its task's one shared
route, with its own arguments; a job that needs more (a trace context, a per-call
timeout, flow marks, callbacks) still gets a route of its own."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from echomq import App
from echomq.core.payload import encode
from echomq.runtime import tracing
from echomq.runtime.handler import Job


def _job(payload: bytes, n: int = 0) -> Job:
    return Job("q", f"j{n}", 1, payload)


def _run(route: Any, job: Job) -> Any:
    out = route.handler(job)
    return asyncio.run(out) if asyncio.iscoroutine(out) else out


def test_plain_jobs_share_their_tasks_route_and_keep_their_own_arguments(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    # no span to open (as in a process without an OpenTelemetry SDK): a test that ran
    # before may have set the process's one tracer provider, which cannot be unset
    monkeypatch.setattr(tracing, "quiet", lambda: True)
    @app.task(name="add", max_attempts=3, lease_ms=7000)
    def add(a: int, b: int = 0) -> int:
        return a + b

    @app.task(name="aadd")
    async def aadd(a: int, *, b: int) -> int:
        return a * b

    routed = app.router("default")
    one, two = _job(encode("add", [1], {"b": 2}), 1), _job(encode("add", [10]), 2)
    r1, r2 = routed(one), routed(two)
    assert r1 is r2  # made once per task, not per job
    assert (r1.name, r1.max_attempts, r1.lease_ms) == ("add", 3, 7000)
    assert _run(r1, one) == 3 and _run(r2, two) == 10
    three = _job(encode("aadd", [4], {"b": 5}), 3)
    assert _run(routed(three), three) == 20


def test_jobs_that_need_their_own_route_get_one(app: App) -> None:
    seen: list[Any] = []

    @app.task(name="plain")
    def plain(x: int) -> int:
        return x

    @app.task(name="called", on_success=lambda *a: seen.append(a))
    def called(x: int) -> int:
        return x + 1

    routed = app.router("default")
    shared = routed(_job(encode("plain", [1])))
    timed = routed(_job(encode("plain", [2], timeout_ms=1500)))
    assert timed is not shared and timed.timeout_ms == 1500
    body = json.loads(encode("plain", [3]))
    body["flow"] = {"keep": 60_000}
    node = routed(_job(json.dumps(body).encode()))
    assert node is not shared and node.keep_result_ms == 60_000
    a, b = routed(_job(encode("called", [1]))), routed(_job(encode("called", [2])))
    assert a is not b and a.after is not None  # callbacks carry each job's arguments
    job = _job(encode("called", [5]))
    route = routed(job)
    assert _run(route, job) == 6 and route.after is not None and route.after.box == [6]

