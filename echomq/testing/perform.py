"""``perform``: one call of a task as a worker makes it, with nothing written.

The arguments are checked as ``enqueue`` checks them (``TypeError`` before anything runs)
and travel through the payload's JSON (so a tuple arrives a list, a ``Decimal`` is
refused as ``enqueue`` refuses it); the handler runs the way the task's route runs it
(an ``async def`` on an event loop, a plain function in this thread, ``isolation="process"``
in a child), with ``current_job()`` set to a job that no server holds (``progress`` and
``children`` raise: they need a worker); the task's ``timeout`` bounds it (a
``TimeoutError``); ``Fail``, ``Retry``, ``Delay`` and any other exception reach the caller
as raised. The return value comes back through JSON, as a kept result reads (strictly when
the task keeps results: one JSON cannot carry raises ``TypeError``, as the worker fails
that run). No transition runs: no row, no retry, no callback.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from echomq.core import ids
from echomq.core.payload import decode
from echomq.runtime import handler
from echomq.runtime.handler import Job
from echomq.testing import loops
from echomq.testing.draining import round_trip

if TYPE_CHECKING:
    from echomq.tasks.task import Task


def _timed_out(timeout_ms: int) -> TimeoutError:
    return TimeoutError(f"job exceeded its timeout of {timeout_ms / 1000:g} s")


async def _awaited(fn: Callable[[Job], Any], job: Job, timeout_ms: int | None) -> Any:
    entered = handler.enter(job)
    try:
        if timeout_ms is None:
            return await fn(job)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await fn(job)
        except TimeoutError as exc:
            raise _timed_out(timeout_ms) from exc
    finally:
        handler.leave(entered)


def _called(fn: Callable[[Job], Any], job: Job, timeout_ms: int | None) -> Any:
    entered = handler.enter(job)
    try:
        if timeout_ms is None:
            return fn(job)
        # a plain function cannot be stopped: it runs in a thread the caller stops waiting
        # for at the timeout, as the worker abandons it
        ctx = contextvars.copy_context()
        pool = ThreadPoolExecutor(1, thread_name_prefix="echomq-perform")
        try:
            return pool.submit(ctx.run, fn, job).result(timeout_ms / 1000)
        except FutureTimeout:
            raise _timed_out(timeout_ms) from None
        finally:
            pool.shutdown(wait=False)
    finally:
        handler.leave(entered)


def perform(task: Task[Any, Any], *args: Any, **kwargs: Any) -> Any:
    """Run one call of ``task`` with these arguments as a worker would (see the module
    docstring) and return its value; nothing is written to the server."""
    task.check(args, kwargs)
    body = task.payload(*args, **kwargs)
    _name, sent_args, sent_kwargs = decode(body)
    route = task.route(sent_args, sent_kwargs)
    job = Job(task.queues[0], ids.mint(), 1, body)
    fn = route.handler
    if inspect.iscoroutinefunction(fn):
        value = loops.run(lambda: _awaited(fn, job, route.timeout_ms))
    else:
        value = _called(fn, job, route.timeout_ms)
        if inspect.isawaitable(value):  # a plain function that returned an awaitable
            pending = value

            async def finish() -> Any:
                return await pending

            value = loops.run(finish)
    if route.keep_result_ms is None:
        return round_trip(value)
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"return value is not JSON-serializable (the task keeps its "
                        f"result): {exc}") from None
