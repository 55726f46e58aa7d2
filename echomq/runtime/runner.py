"""Calling one handler for a consumer: where it runs, how long it may, and how it stops.

An ``async def`` handler runs on the consumer's event loop, in the task that holds its job;
a plain function runs in a thread pool sized to the consumer's concurrency (with the job's
context, so ``current_job()`` works there too). While it runs, its ``Held`` lease is in the
checkpoint loop's table (``echomq.runtime.leases``), and leaves it the moment the handler returns.

Outcomes (``echomq.runtime.outcome``): ``Completed`` (the JSON text of the return value
when the route keeps results, else none), ``Delayed`` (a ``Delay`` raised), ``Limited`` (a
``RateLimited`` raised), ``Suspended`` (a durable sleep or wait parked the job),
``Failed`` (the exception), ``TimedOut`` or ``Cancelled``.

- Timeout: ``asyncio.timeout`` around the call. An ``async`` handler is cancelled at the
  deadline; a plain function cannot be stopped, so it is abandoned: the await on its thread
  ends, its pool is replaced (so the slot is free at once) and its eventual return is
  ignored. Its lease is no longer checkpointed either way.
- Cancel: a checkpoint that sees a cancel request sets ``job.cancelled`` and cancels the
  task of an ``async`` handler, which ends ``cancelled`` (a drain's cancel still propagates);
  a plain function that returns after ``job.cancelled`` turned true ends ``cancelled`` too.

Clocks: the timeout is on the event loop's (HOST monotonic) clock.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from echomq.core import serial
from echomq.runtime import handler
from echomq.runtime.durable import Suspend
from echomq.runtime.handler import Delay, Job, RateLimited
from echomq.runtime.leases import Held
from echomq.runtime.outcome import (
    CANCELLED,
    DONE,
    Completed,
    Delayed,
    Failed,
    Limited,
    Outcome,
    TimedOut,
)

log = logging.getLogger("echomq.consumer")



class Encoded(NamedTuple):
    """A return value with the encoder its route chose (an app's serializer and codec),
    run only when the value is kept."""

    value: Any
    dumps: Callable[[Any], bytes]

class Runner:
    """Runs the handlers of one consumer; ``held`` is the checkpoint loop's table."""

    def __init__(self, concurrency: int, executor: ThreadPoolExecutor | None,
                 stats: Any, held: dict[str, Held]) -> None:
        self.concurrency = concurrency
        self.stats = stats  # ConsumerStats: counts ``abandoned``
        self.held = held
        self._is_async: dict[Any, bool] = {}  # code object -> is it a coroutine function
        self._executor = executor
        self._own_executor = executor is None

    async def run(self, fn: Callable[[Job], Any], job: Job, held: Held,
                  timeout_ms: int | None, keep_result: bool) -> Outcome:
        """Run ``fn(job)`` while its lease is checkpointed; the outcome (see above)."""
        # keyed by the code object: routes build a fresh closure per job, and a cache keyed
        # by the closure would grow by one entry per job in a long-running worker
        code = getattr(fn, "__code__", None)
        is_async = self._is_async.get(code) if code is not None else None
        if is_async is None:
            is_async = inspect.iscoroutinefunction(fn)
            if code is not None:
                self._is_async[code] = is_async
        # a cancel request stops an async handler by cancelling this task (at an await)
        held.task = asyncio.current_task() if is_async else None
        self.held[job.id] = held
        clock: asyncio.Timeout | None = None
        try:
            if timeout_ms is None and is_async:  # the common case, without a frame more
                entered = handler.enter(job)
                try:
                    value = await fn(job)
                finally:
                    handler.leave(entered)
            elif timeout_ms is None:
                value = await self.call(fn, job, is_async)
            else:
                async with asyncio.timeout(timeout_ms / 1000) as clock:
                    value = await self.call(fn, job, is_async)
        except Suspend as parked:  # a durable step parked the job (its script moved it)
            return parked.outcome
        except Delay as d:
            return Delayed(d.mode, d.value)
        except RateLimited as limited:
            return Limited(limited.ms)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not job._cancelled or task is None:
                raise  # a drain or shutdown, not a cancel request
            task.uncancel()
            return CANCELLED
        except TimeoutError as exc:
            if clock is None or not clock.expired():
                return Failed(exc)  # the handler's own timeout, an ordinary failure
            if not is_async:
                self.abandon(job)
            return TimedOut(TimeoutError(
                f"job exceeded its timeout of {(timeout_ms or 0) / 1000:g} s"))
        except Exception as exc:
            return Failed(exc)
        finally:
            self.held.pop(job.id, None)
        if job._cancelled:  # a plain function saw .cancelled and returned
            return CANCELLED
        if not keep_result:
            return DONE
        try:
            if isinstance(value, Encoded):
                return Completed(value.dumps(value.value))
            return Completed(serial.dumps(value))
        except (TypeError, ValueError) as exc:
            return Failed(TypeError(f"return value is not JSON-serializable (the task "
                                    f"keeps its result): {exc}"))

    async def call(self, fn: Callable[[Job], Any], job: Job, is_async: bool) -> Any:
        token = handler.enter(job)
        try:
            if is_async:
                return await fn(job)
            ctx = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self.pool(), ctx.run, fn, job)
            if inspect.isawaitable(result):
                return await result
            return result
        finally:
            handler.leave(token)

    def pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="echomq")
        return self._executor

    def abandon(self, job: Job) -> None:
        """A plain-function handler ran past its timeout: Python cannot stop a thread, so
        it is left to finish on its own (its return is ignored; its job was failed) and new
        jobs get a fresh pool, so the slot it held is free at once."""
        self.stats.abandoned += 1
        # the attempt's failure is the line an operator sees: one failure, one line
        log.debug("job %s: plain-function handler abandoned in its thread at its timeout "
                  "(%d abandoned so far)", job.id, self.stats.abandoned)
        if self._own_executor and self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def shutdown(self) -> None:
        """Drop the thread pool this runner made (its running threads finish on their own)."""
        if self._executor is not None and self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
