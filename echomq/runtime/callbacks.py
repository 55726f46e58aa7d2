"""Per-task callbacks: ``on_success``, ``on_failure``, ``on_retry``, run by the worker after
a job's outcome is recorded (RQ's ``on_success``/``on_failure``, Celery's ``on_success`` /
``on_failure`` / ``on_retry`` and ``link``/``link_error``).

A callback is called with one ``Settled`` (the job's id, queue, task, arguments, outcome,
return value or error, and its counts); one that takes two positional arguments is called
with ``(settled, result)`` for a success and ``(settled, error)`` for a retry or a death.
An ``async def`` callback is awaited on the worker's loop; a plain one runs in a thread.
It runs in the job's slot after the outcome landed, so it never changes the outcome: an
error it raises is logged (``echomq.callbacks``) and that is all. It runs once per outcome
the worker records; a job the reaper dead-letters (its worker died) gets none, and a
worker that dies mid-callback does not run it again (at most once).

``on_success``: completed. ``on_retry``: a failure that will run again (after the backoff,
or a ``Retry``). ``on_failure``: dead (budget spent, ``Fail``, ``dont_retry_on``/``retry_on``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("echomq.callbacks")

OUTCOMES = {"completed": "on_success", "retrying": "on_retry", "dead": "on_failure"}


@dataclass(frozen=True, slots=True)
class Settled:
    """What a task callback is given: the job and how it ended.

    ``outcome``: ``"completed"``, ``"retrying"`` or ``"dead"``; ``result``: the return value
    (completed); ``error``: the exception (retrying, dead) and ``error_text`` its kept text;
    ``reason``: why (``echomq.runtime.verdict``); ``delay_ms``: the wait before the retry;
    ``runs``/``failures``/``delays``: the counts after this outcome (``echomq.core.tally``)."""

    id: str
    queue: str
    task: str | None
    args: list[Any]
    kwargs: dict[str, Any]
    outcome: str
    result: Any = None
    error: BaseException | None = None
    error_text: str | None = None
    reason: str | None = None
    delay_ms: int | None = None
    runs: int = 0
    failures: int = 0
    delays: int = 0

    @property
    def attempts(self) -> int:
        """``runs``, by the name RQ and Celery users look for."""
        return self.runs


Callback = Callable[..., Any]


def check(name: str, fn: Callback | None) -> Callback | None:
    """A callback given at declaration: callable (or ``None``), else ``TypeError``."""
    if fn is not None and not callable(fn):
        raise TypeError(f"{name} must be a function, not {type(fn).__name__}")
    return fn


def _takes_two(fn: Callback) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


@dataclass(slots=True)
class After:
    """One job's callbacks and the call they describe (built per job by the task's
    route); ``box`` receives the handler's return value."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    on_success: Callback | None = None
    on_failure: Callback | None = None
    on_retry: Callback | None = None
    box: list[Any] = field(default_factory=list)

    def wants(self, outcome: str) -> bool:
        name = OUTCOMES.get(outcome)
        return name is not None and getattr(self, name) is not None

    async def run(self, queue: str, job_id: str, outcome: str, **facts: Any) -> None:
        """Run the callback for ``outcome`` (if the task has one); its errors are logged."""
        name = OUTCOMES.get(outcome)
        fn: Callback | None = getattr(self, name) if name else None
        if fn is None:
            return
        if outcome == "completed" and self.box:
            facts.setdefault("result", self.box[0])
        settled = Settled(job_id, queue, self.task, self.args, self.kwargs, outcome, **facts)
        call = ((settled, settled.result if outcome == "completed" else settled.error)
                if _takes_two(fn) else (settled,))
        try:
            if inspect.iscoroutinefunction(fn):
                await fn(*call)
            else:
                got = await asyncio.to_thread(fn, *call)
                if inspect.isawaitable(got):
                    await got
        except Exception:
            log.exception("job %s: %s callback %s of task %s failed (the job stays %s)",
                          job_id, name, getattr(fn, "__qualname__", fn), self.task, outcome)
