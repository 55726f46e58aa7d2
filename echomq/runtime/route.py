"""How to run one job: the handler a router picks, with its retry, lease and timeout settings.

A setting a route leaves unset falls back to the consumer's (``lease_ms``, ``timeout_ms``);
the retry settings default to 1000 ms between attempts and 25 attempts, and every
exception retries unless ``retry_on``/``dont_retry_on`` say otherwise
(``echomq.runtime.verdict``). ``after`` carries the task's callbacks for this job
(``echomq.runtime.callbacks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echomq.core import backoff
from echomq.core.payload import task_of
from echomq.runtime.callbacks import After
from echomq.runtime.handler import Job
from echomq.runtime.verdict import Classes, Verdict, judge

DEFAULT_LEASE_MS = 30_000
DEFAULT_RETRY_DELAY_MS = 1_000
DEFAULT_MAX_ATTEMPTS = 25


@dataclass(frozen=True, slots=True)
class Route:
    """How to run one job: the handler and its retry and lease settings."""

    handler: Callable[[Job], Any]
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: backoff.Policy | None = None
    retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS
    lease_ms: int | None = None
    timeout_ms: int | None = None  # None: the consumer's default (off unless set)
    keep_result_ms: int | None = None  # keep the JSON return value this long
    name: str | None = None  # the task's name, for logs and the started event
    retry_on: Classes | None = None  # None: every exception retries
    dont_retry_on: Classes = ()
    after: After | None = None  # the task's callbacks, run once the outcome is recorded

    def verdict(self, error: BaseException) -> Verdict:
        """Whether a run that ended in ``error`` retries (``echomq.runtime.verdict``)."""
        return judge(error, self.retry_on, self.dont_retry_on)

    def retry_delay(self, attempts: int) -> int:
        """The delay before the next run after failed attempt number ``attempts``."""
        if self.backoff is not None:
            return backoff.delay_ms(self.backoff, max(1, attempts))
        return self.retry_delay_ms


class UnknownTask(LookupError):
    """A job names a task its app does not declare (a router raises it): the consumer
    dead-letters the job at once, unless another live worker serves that task on the
    queue (``Consumer(on_unknown=...)``), in which case it sends the job back for that
    worker without spending an attempt."""

    def __init__(self, task: str, message: str) -> None:
        super().__init__(message)
        self.task = task


def task_name(payload: bytes) -> str:
    """The task a payload names, for logs and events (read without a route: an unknown
    task's job names it all the same); ``?`` for a payload that is no task's."""
    try:
        return task_of(payload)  # an encrypted payload's header names it: no key needed
    except (ValueError, TypeError, IndexError):
        return "?"


def no_handler(job: Job) -> None:  # pragma: no cover - never called
    raise LookupError(f"no handler for job {job.id}")
