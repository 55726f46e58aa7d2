"""What a handler sees: the ``Job`` in hand, ``current_job()``, and what it may raise to say
how its run ends: ``Delay``, ``RateLimited``, ``Fail`` and ``Retry``.

A handler is called with a ``Job``; inside it (and in anything it calls, thread or task)
``current_job()`` returns that job. The job carries the cooperative controls the runtime
offers while it runs:

- ``job.cancelled``: ``True`` once a cancel request for this job was seen at a lease
  checkpoint (a third of the lease at most after ``jobs.cancel``). An ``async`` handler is
  stopped like ``task.cancel()`` at that checkpoint; a plain function is never interrupted,
  so it polls ``cancelled`` and returns. Either way the job ends ``cancelled``.
- ``job.progress(value)`` / ``await job.aprogress(value)``: store a JSON value on the row
  (token-fenced), shown by ``echomq job`` and the dashboard.
- ``job.delay(...)`` (or ``raise Delay(...)``): back to the schedule without a failure.
- ``job.rate_limited(ms)`` (or ``raise RateLimited(ms)``; ``await job.arate_limited(ms)``
  reads better in an ``async`` handler): an upstream said "too many requests" (an HTTP 429
  with Retry-After). The job goes back to the front of its lane (or of pending) without
  spending an attempt, and its group (or, for a job without a group, the whole queue)
  claims nothing for ``ms``; idle consumers wake when that span ends.
- ``job.step(name, fn, ...)``, ``job.sleep(name, duration)``, ``job.wait_for(key)``:
  durable steps (``echomq.runtime.durable``), recorded on the job and replayed by every
  later run of it.
- ``raise Fail("reason")``: the error is final: the job is dead now, whatever attempts are
  left (the error text ``Fail: reason`` is kept on the row).
- ``raise Retry(delay, error=...)``: a failure retried after ``delay`` (ms or
  ``timedelta``) instead of the backoff's; it spends an attempt like any failure (and is
  dead once the budget is spent), unlike ``Delay``, which spends none.

Clocks: ``Delay(ms)`` is priced on the SERVER clock by the delay transition; ``Delay(at=)``
is an absolute instant on the caller's clock; ``RateLimited(ms)`` counts from SERVER now
when the consumer hands the job back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, NoReturn, TypeVar

from echomq.core import guards as guard
from echomq.core.tally import Tally
from echomq.core.times import to_epoch_ms, to_ms
from echomq.runtime import durable
from echomq.runtime.batching import MemberBatch, batch_of
from echomq.verbs import flows, jobs

T = TypeVar("T")

#: how long a plain-function handler waits for a call it hands to the worker's loop
BLOCKING_CALL_S = 30.0

_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("echomq_job", default=None)
#: a first run's counts: nothing before it
FIRST_RUN = Tally()
#: the worker process's context (``App(on_startup=...)``): set by the worker before its
#: consumers start, so every job task (and the threads they run in) reads it
worker_context: contextvars.ContextVar[SimpleNamespace | None] = contextvars.ContextVar(
    "echomq_worker_context", default=None)


class Delay(Exception):
    """Raised by a handler to send its job back to the schedule without a failure.

    ``Delay(ms)`` runs it again ``ms`` after SERVER now; ``Delay(at=run_at_ms)`` at an
    absolute run-at (caller's clock); a ``timedelta`` / aware ``datetime`` works too.
    Attempts are untouched by the delay itself (the next claim increments them, as after
    any retry) and a delay never dead-letters; the consumer counts delays on the row
    (``delays``) and keeps them out of the retry budget, so a delay spends no attempt.
    """

    def __init__(self, ms: int | dt.timedelta | None = None, *,
                 at: int | dt.datetime | None = None) -> None:
        if (ms is None) == (at is None):
            raise TypeError("Delay takes a delay (ms or timedelta) or at=, exactly one")
        if at is not None:
            self.mode = "at"
            self.value = guard.instant("at", to_epoch_ms(at))
        else:
            assert ms is not None
            self.mode = "in"
            self.value = guard.span("ms", to_ms(ms))
        super().__init__(f"delay {self.mode} {self.value}")


class RateLimited(Exception):
    """Raised by a handler whose upstream is over its limit: the job goes back without a
    failure and without spending an attempt, and its group (the queue, for a job without a
    group) starts nothing for ``ms`` (an int of ms, or a ``timedelta``), counted from
    SERVER now by the ``rate_limited`` transition. ``ms`` is checked here (``TypeError`` /
    ``ValueError``), so a bad span fails in the handler, not in the consumer."""

    def __init__(self, ms: int | dt.timedelta) -> None:
        self.ms = guard.span("ms", to_ms(ms), minimum=1)
        super().__init__(f"rate limited for {self.ms} ms")


class Fail(Exception):
    """Raised by a handler whose error is final: the job is dead-lettered now, without the
    attempts it has left, with ``Fail: <reason>`` kept as its error (Celery's ``Reject``
    without requeue, BullMQ's ``UnrecoverableError``). ``raise Fail(...) from exc`` keeps
    the cause for the logs; ``on_failure`` callbacks run as for any death."""

    def __init__(self, reason: object = "failed") -> None:
        self.reason = str(reason)
        super().__init__(self.reason)


class Retry(Exception):
    """Raised by a handler to retry its job after ``delay`` (ms or ``timedelta``, from
    SERVER now) instead of after its backoff's delay: a failure that spends an attempt (the
    job is dead once ``max_attempts`` are spent), whatever ``retry_on`` says. ``error``
    (an exception or a text) is the error kept on the row and handed to ``on_retry``; by
    default ``Retry: retry in <ms> ms``. ``Delay`` is the same move without a failure and
    without spending an attempt. ``delay`` is checked here (``TypeError``/``ValueError``)."""

    def __init__(self, delay: int | dt.timedelta, error: BaseException | str | None = None
                 ) -> None:
        self.delay_ms = guard.span("delay", to_ms(delay))
        if error is not None and not isinstance(error, (BaseException, str)):
            raise TypeError(f"Retry(error=) is an exception or a text, not "
                            f"{type(error).__name__}")
        self.error = error
        self.text: str | None = None  # set when the text crossed from a child process
        super().__init__(f"retry in {self.delay_ms} ms" if error is None else str(error))

    def error_text(self) -> str:
        """The error kept on the row: the wrapped exception's ``Type: text``, else
        ``Retry: <text>``."""
        if self.text is not None:
            return self.text
        if isinstance(self.error, BaseException):
            return f"{type(self.error).__name__}: {self.error}"
        return f"Retry: {self}"


@dataclass(slots=True)
class Job:
    """A job in hand: what a handler receives (and what ``current_job()`` returns)."""

    queue: str
    id: str
    token: int
    payload: bytes
    # set by the runtime: the connector and loop the job's verbs run on, and the cancel
    # flag the lease checkpoint raises
    _conn: Any = field(default=None, repr=False, compare=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False, compare=False)
    _cancelled: bool = field(default=False, repr=False, compare=False)
    # durable steps (issue 35): this run's journal, made at its first durable call
    _journal: durable.Journal | None = field(default=None, repr=False, compare=False)
    _parked: bool = field(default=False, repr=False, compare=False)  # a step let it go
    # -- what the run knows of its job (issue 32): its counts before this run (read once
    # at the claim of a job run before: a first run's are all 0), its route's task and
    # budget; ``context``: the worker's (``App(on_startup=...)``)
    _tally: Tally = field(default=FIRST_RUN, repr=False, compare=False)
    _task: str | None = field(default=None, repr=False, compare=False)
    _max_attempts: int | None = field(default=None, repr=False, compare=False)
    # the decoded call (args, kwargs) a task's shared route runs with: its router decodes
    # the payload once per job and leaves the arguments here (``tasks.routing``)
    _call: tuple[list[Any], dict[str, Any]] | None = field(default=None, repr=False,
                                                             compare=False)

    @property
    def runs(self) -> int:
        """How many times a worker started this job, this run included (the token)."""
        return self.token

    @property
    def failures(self) -> int:
        """The runs of this job that ended in an error before this one (Celery's
        ``self.request.retries``)."""
        return self._tally.failures

    @property
    def delays(self) -> int:
        """The runs of this job that ended in a ``Delay`` before this one."""
        return self._tally.delays

    @property
    def max_attempts(self) -> int | None:
        """The runs (delays not counted) this job may spend before it is dead (``None``
        outside a task's route)."""
        return self._max_attempts

    @property
    def task(self) -> str | None:
        """The name of the task this job runs (``None`` for a payload that is no task's)."""
        return self._task

    @property
    def context(self) -> SimpleNamespace | None:
        """The worker process's context: what its ``App(on_startup=...)`` hook put there
        (an empty namespace in a worker without hooks; ``None`` outside a worker)."""
        return worker_context.get()

    async def counted(self) -> None:
        """Read this job's counts from its row (a job claimed before: ``token`` > 1), for
        ``failures`` and ``delays``; a read that fails leaves them 0."""
        if self.token > 1 and self._conn is not None:
            with contextlib.suppress(Exception):
                self._tally = await jobs.tally(self._conn, self.queue, self.id)

    @property
    def attempts(self) -> int:
        """How many times this job has been claimed, this run included (the token)."""
        return self.token

    @property
    def cancelled(self) -> bool:
        """``True`` once a cancel request was seen at a lease checkpoint: return soon (a
        plain-function handler is never interrupted; the job ends ``cancelled`` anyway)."""
        return self._cancelled

    # -- batches (issue 36) ----------------------------------------------------------------
    @property
    def batch(self) -> MemberBatch | None:
        """The batch this job belongs to (``app.batch``), ``None`` outside one: its ``id``,
        and ``add(sig, ...)`` to add members while this job still counts as pending."""
        bid = batch_of(self.payload)
        return None if bid is None else MemberBatch(bid)

    @property
    def args(self) -> list[Any]:
        """The task's positional arguments, from the payload (a chunk handler's jobs)."""
        return list(json.loads(self.payload).get("args", []))

    @property
    def kwargs(self) -> dict[str, Any]:
        """The task's keyword arguments, from the payload."""
        return dict(json.loads(self.payload).get("kwargs", {}))

    def delay(self, ms: int | dt.timedelta | None = None, *,
              at: int | dt.datetime | None = None) -> NoReturn:
        """Send this job back to the schedule (raises ``Delay``; the consumer does the rest)."""
        raise Delay(ms, at=at)

    def rate_limited(self, ms: int | dt.timedelta) -> NoReturn:
        """Hand this job back because an upstream limit was met (raises ``RateLimited``;
        the consumer does the rest): no attempt is spent and its group, or the queue, claims
        nothing for ``ms``. Call it as the last thing the handler does."""
        raise RateLimited(ms)

    async def arate_limited(self, ms: int | dt.timedelta) -> NoReturn:
        """``rate_limited``, for ``await`` in an ``async`` handler (it raises all the same)."""
        raise RateLimited(ms)

    def progress(self, value: Any) -> None:
        """Store ``value`` (anything JSON can carry) as the job's progress, from a
        plain-function handler (it waits for the write). In an ``async`` handler use
        ``await job.aprogress(value)``: blocking the event loop would stall every job."""
        text = _progress_text(value)
        loop = self._require_loop()
        if _on_loop_thread(loop):
            raise RuntimeError("job.progress() would block the event loop: use "
                               "'await job.aprogress(value)' in an async handler")
        future = asyncio.run_coroutine_threadsafe(self._write_progress(text), loop)
        # bounded: a worker that stops (its loop closed) must not hang this thread for ever
        future.result(timeout=BLOCKING_CALL_S)

    async def aprogress(self, value: Any) -> None:
        """``progress``, awaited (for ``async`` handlers)."""
        text = _progress_text(value)
        loop = self._require_loop()
        if asyncio.get_running_loop() is loop:
            await self._write_progress(text)
        else:  # another loop (a handler's private one): hop to the runtime's loop
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(self._write_progress(text), loop))

    def children(self) -> list[flows.Child]:
        """This flow parent's children, in the order they were given: each one's queue,
        id, state (``completed``, ``dead``, ``cancelled``), JSON ``result`` (bytes;
        ``Child.value`` decodes it) and last error. ``[]`` for a job outside a flow. From
        a plain-function handler (it waits for the read); in an ``async`` handler use
        ``await job.achildren()``."""
        loop = self._require_loop()
        if _on_loop_thread(loop):
            raise RuntimeError("job.children() would block the event loop: use "
                               "'await job.achildren()' in an async handler")
        future = asyncio.run_coroutine_threadsafe(self.achildren(), loop)
        got: list[flows.Child] = future.result()
        return got

    async def achildren(self) -> list[flows.Child]:
        """``children``, awaited (for ``async`` handlers)."""
        loop = self._require_loop()
        read: Awaitable[list[flows.Child]] = flows.children(self._conn, self.queue, self.id)
        if asyncio.get_running_loop() is loop:
            return await read
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
            _awaited(read), loop))

    # -- durable steps (issue 35; echomq.runtime.durable): a plain-function handler calls
    # -- these and gets the value; an async handler awaits them

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Step ``name``: ``fn(*args, **kwargs)``'s result, recorded on the job (JSON) the
        first time; every later run of the job returns the recorded result without calling
        ``fn``. A name is unique within a job (a repeat raises ``ValueError``)."""
        return durable.step(self, name, fn, args, kwargs)

    def sleep(self, name: str, duration: int | dt.timedelta | dt.datetime) -> Any:
        """Sleep step ``name``: the job leaves its slot for ``duration`` (ms or a
        ``timedelta`` from SERVER now; an aware ``datetime``: until then) and the handler
        re-runs from the top after it, passing this step; no attempt is spent."""
        return durable.sleep(self, name, duration)

    def wait_for(self, key: str, timeout: float | dt.timedelta | None = None, *,
                 name: str | None = None) -> Any:
        """Wait for signal ``key`` (``app.signal``): the job parks (state ``waiting``)
        and re-runs when it comes; the signal's payload is this step's result. After
        ``timeout`` (SECONDS or a ``timedelta``, SERVER clock) it raises
        ``errors.SignalTimeout``.
        The step is named ``name`` (default: the key)."""
        return durable.wait_for(self, key, timeout, name)

    async def _write_progress(self, text: str) -> None:
        await jobs.progress(self._conn, self.queue, self.id, self.token, text)

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._conn is None or self._loop is None:
            raise RuntimeError(f"job {self.id} is not held by a running consumer")
        return self._loop


async def _awaited(read: Awaitable[T]) -> T:
    return await read


def _progress_text(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"progress must be JSON-serializable: {exc}") from None


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:  # no loop runs in this thread: a worker thread
        return False


class NoCurrentJob(LookupError):
    """``current_job()`` was called outside a running handler."""


def current_job() -> Job:
    """The job the calling handler is running (in its task, or its worker thread).

    Raises ``NoCurrentJob`` (a ``LookupError``) outside a handler, so handler code can use
    the result without a ``None`` check; ``peek_job()`` returns ``None`` instead.
    """
    job = _current.get()
    if job is None:
        raise NoCurrentJob("current_job() called outside a running EchoMQ handler")
    return job


def peek_job() -> Job | None:
    """The job in hand, or ``None`` outside a handler."""
    return _current.get()


def enter(job: Job) -> contextvars.Token[Job | None]:
    """Make ``job`` the current job of this context (the consumer, around a handler)."""
    return _current.set(job)


def leave(token: contextvars.Token[Job | None]) -> None:
    _current.reset(token)
