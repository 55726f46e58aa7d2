"""Durable steps in a handler: ``job.step``, ``job.sleep`` and ``job.wait_for`` (DESIGN §3h).

A durable handler re-runs from the top on every run of its job; each step it passes returns
what was recorded the first time. A run reads the job's journal once, at its first durable
call (one round trip: ``verbs.durable.steps``), and answers every step recorded ``done``
from it without a call; a step not recorded runs its function and records the JSON of its
result (``verbs.durable.record``, fenced by the job's token: a stale holder records
nothing). The result handed back is the recorded JSON decoded, the first run as every
replay, so a tuple is a list either way.

A sleep or a wait that parks the job (the script already moved it off active, counted the
delay and spent the token) ends the run by raising ``Suspend``, a ``BaseException`` so a
handler's ``except Exception`` does not swallow it; the runner turns it into its
``Suspended`` outcome, which the settler reports without a transition. A wait recorded
``timed_out`` raises ``errors.SignalTimeout`` in the handler, on that run and every later one.

Sync and async: a method called in a thread with no running event loop (a plain-function
handler) blocks until its calls land and runs the step's function in that thread; called on
an event loop (an ``async`` handler) it returns an awaitable (the calls hop to the worker's
loop when the handler runs its own).

Clocks: every instant (a sleep's wake, a wait's timeout, ``at_ms``) is SERVER ms, priced
inside the scripts; nothing here reads the host clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from echomq.core import errors
from echomq.core.times import seconds_to_ms, to_epoch_ms, to_ms
from echomq.runtime.outcome import Suspended
from echomq.verbs import durable
from echomq.verbs.durable import Recorded, Step, StepState

#: how long a plain-function handler waits for a durable call it hands to the worker's loop
BLOCKING_CALL_S = 30.0


class Suspend(BaseException):
    """Raised by a step that parked its job (a sleep or a wait): the run ends ``outcome``.
    A ``BaseException``, so a handler's ``except Exception`` lets it through."""

    def __init__(self, outcome: Suspended) -> None:
        super().__init__(f"suspended at step {outcome.step!r}")
        self.outcome = outcome


class Journal:
    """One run's view of its job's steps: the recorded ones (read at the first durable
    call) and the names this run used (a name is unique within a run)."""

    __slots__ = ("known", "used")

    def __init__(self) -> None:
        self.known: dict[str, Step] | None = None
        self.used: set[str] = set()

    def use(self, name: object) -> str:
        """``name`` checked, and new to this run (a repeat raises ``ValueError``)."""
        checked = durable.step_name(name)
        if checked in self.used:
            raise ValueError(f"step name {checked!r} is used twice in one run: step names "
                             "are unique within a job")
        self.used.add(checked)
        return checked

    async def load(self, job: Any) -> dict[str, Step]:
        """The recorded steps by name (read once per run)."""
        if self.known is None:
            read = await durable.steps(job._conn, job.queue, job.id)
            self.known = {s.name: s for s in read}
        return self.known


def journal(job: Any) -> Journal:
    """``job``'s journal for this run, made at its first durable call (most jobs never
    make one)."""
    if job._journal is None:
        job._journal = Journal()
    found: Journal = job._journal
    return found


def _decoded(raw: bytes | str | None) -> Any:
    return None if raw is None else json.loads(raw)


def _json(name: str, value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"step {name!r}: its result must be JSON-serializable: {exc}") from None


def _settled(job: Any, key: str | None, got: Recorded, wake: int | None = None) -> Any:
    """A sleep's or a wait's answer: the value the handler goes on with, or the end of the
    run (``Suspend``; ``SignalTimeout`` for a wait that timed out)."""
    step = got.step
    known = journal(job).known
    assert known is not None  # loaded before any script answers
    known[step.name] = step
    # a sleep, a wait or a cancel let go of the job: its lease is no longer this run's
    job._parked = step.state in (StepState.SLEEPING, StepState.WAITING, StepState.CANCELLED)
    match step.state:
        case StepState.DONE:
            return _decoded(step.result)
        case StepState.TIMED_OUT:
            raise errors.SignalTimeout(key or step.name, step.name, step.at_ms)
        case StepState.SLEEPING:
            raise Suspend(Suspended(step.name, step.until_ms if wake is None else wake))
        case StepState.WAITING:
            raise Suspend(Suspended(step.name, step.until_ms, signal=key, state="waiting"))
        case StepState.CANCELLED:
            raise Suspend(Suspended(step.name, signal=key, state="cancelled"))


def _replay(job: Any, name: str, known: dict[str, Step], key: str | None = None) -> Any:
    """What a recorded step answers without a call: ``(True, value)`` for a step done (or
    a wait timed out: raises), ``(False, None)`` when the script must run."""
    step = known.get(name)
    if step is None or step.state not in (StepState.DONE, StepState.TIMED_OUT):
        return False, None
    return True, _settled(job, key, Recorded(False, step))


# -- the calls, each one coroutine run on the worker's loop -----------------------------


async def _record(job: Any, name: str, text: str) -> Any:
    got = await durable.record(job._conn, job.queue, job.id, job.token, name, text)
    known = journal(job).known
    assert known is not None
    known[name] = got.step
    return _decoded(got.step.result)


async def _sleep(job: Any, name: str, mode: str, ms: int) -> Any:
    found, value = _replay(job, name, await journal(job).load(job))
    if found:
        return value
    got = await durable.sleep(job._conn, job.queue, job.id, job.token, name, ms, mode)
    return _settled(job, None, got)


async def _wait(job: Any, name: str, key: str, timeout_ms: int | None) -> Any:
    found, value = _replay(job, name, await journal(job).load(job), key)
    if found:
        return value
    got = await durable.wait_for(job._conn, job.queue, job.id, job.token, name, key,
                                 timeout_ms)
    return _settled(job, key, got)


# -- sync or async: where the caller runs ---------------------------------------------


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread: a plain-function handler's
        return None


def _blocking(job: Any, work: Coroutine[Any, Any, Any]) -> Any:
    """Run ``work`` on the worker's loop and wait for it, from a handler's thread."""
    loop = job._require_loop()
    return asyncio.run_coroutine_threadsafe(work, loop).result(timeout=BLOCKING_CALL_S)


async def _hopped(job: Any, work: Coroutine[Any, Any, Any]) -> Any:
    """Await ``work`` on the worker's loop (from it, or from a handler's own loop)."""
    loop = job._require_loop()
    if asyncio.get_running_loop() is loop:
        return await work
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))


def _either(job: Any, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    if _running() is None:
        return _blocking(job, make())
    return _hopped(job, make())


def step(job: Any, name: object, fn: Callable[..., Any], args: tuple[Any, ...],
         kwargs: dict[str, Any]) -> Any:
    """``job.step``: the recorded result of step ``name``, or ``fn(*args, **kwargs)``'s,
    recorded (see the module's docstring)."""
    checked = journal(job).use(name)
    if not callable(fn):
        raise TypeError(f"step {checked!r}: fn must be callable, not {type(fn).__name__}")
    if _running() is None:
        found, value = _replay(job, checked, _blocking(job, journal(job).load(job)))
        if found:
            return value
        result = fn(*args, **kwargs)
        return _blocking(job, _record(job, checked, _json(checked, result)))
    return _astep(job, checked, fn, args, kwargs)


async def _astep(job: Any, name: str, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    found, value = _replay(job, name, await _hopped(job, journal(job).load(job)))
    if found:
        return value
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return await _hopped(job, _record(job, name, _json(name, result)))


def sleep(job: Any, name: object, duration: int | dt.timedelta | dt.datetime) -> Any:
    """``job.sleep``: ``duration`` ms (or a ``timedelta``) from SERVER now, or until an
    aware ``datetime`` (its epoch ms)."""
    checked = journal(job).use(name)
    if isinstance(duration, dt.datetime):
        mode, ms = "at", to_epoch_ms(duration)
    else:
        mode, ms = "in", to_ms(duration)
    return _either(job, lambda: _sleep(job, checked, mode, ms))


def wait_for(job: Any, key: str, timeout: float | dt.timedelta | None,
             name: str | None) -> Any:
    """``job.wait_for``: the payload of signal ``key`` (the step is named ``name``, by
    default the key), or ``errors.SignalTimeout`` after ``timeout`` (SECONDS, as every wait
    in EchoMQ, or a ``timedelta``; SERVER clock; ``None``: none)."""
    checked = journal(job).use(key if name is None else name)
    timeout_ms = seconds_to_ms("timeout", timeout)
    return _either(job, lambda: _wait(job, checked, key, timeout_ms))

