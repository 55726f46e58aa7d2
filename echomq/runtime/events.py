"""The runtime's timeline for the host program: ``Event`` and observers.

A consumer emits an ``Event`` for each step of a job it holds (``started``, ``completed``,
``retrying``, ``dead``, ``delayed``, ``rate_limited`` (info: ``ms``),
``cancelled``, ``timed_out``, ``lost``, ``settled``: an outcome an earlier try had already
recorded, ``handed_back``: a job of a task its app does not declare, sent back for the live
worker whose app does (info: ``ms``, ``task``), ``suspended``: a durable sleep or wait
parked the job (info: ``step``, ``state``, ``wake_ms``, ``signal``)) and for its own
weather (``degraded``, ``recovered``). ``Event.attempts`` is the job's runs so far (the
claim's token). ``retrying`` and ``dead`` say why and count in the
one vocabulary of ``echomq.core.tally``: info ``error`` (``Type: text``), ``reason``
(``retrying``: ``"backoff"`` or ``"retry"``, a ``Retry`` raised; ``dead``: ``"exhausted"``,
``"fail"``, ``"dont_retry_on"`` or ``"retry_on"``: ``echomq.runtime.verdict``), ``runs``,
``failures``, ``delays``, ``stalled``, and ``tried`` (the runs that count against
``max_attempts``); ``retrying`` also ``delay_ms``. Pass an observer as
``Consumer(on_event=...)``, ``Worker(on_event=...)`` or ``App(on_event=...)``; from the
command line, ``echomq worker myapp:app --events myapp.hooks:on_event`` imports one. An
observer runs on the event loop: keep it short (hand slow work to a thread or a queue). An
observer that raises is logged and ignored; it never breaks the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echomq.runtime.imports import import_from_cwd

log = logging.getLogger("echomq.events")

KINDS = ("started", "completed", "retrying", "dead", "delayed", "rate_limited", "cancelled",
         "timed_out", "lost", "settled", "handed_back", "degraded", "recovered", "suspended")


@dataclass(frozen=True, slots=True)
class Event:
    """A line of the consumer's timeline, for ``on_event`` (HOST wall-clock ``at``)."""

    kind: str  # one of KINDS
    queue: str
    job_id: str | None
    attempts: int
    info: dict[str, Any]
    at: float


Observer = Callable[[Event], None]


def emit(observer: Observer | None, kind: str, queue: str, job_id: str | None,
         attempts: int, info: dict[str, Any]) -> None:
    """Hand one event to ``observer`` (if any); its failures are logged, not raised."""
    if observer is None:
        return
    try:
        observer(Event(kind, queue, job_id, attempts, info, time.time()))
    except Exception:  # a broken observer must not break the loop
        log.exception("on_event observer failed")


def load_observer(spec: str) -> Observer:
    """Import ``module:function`` (the current directory is importable) as an observer.

    Raises ``ValueError`` with a readable reason when the spec is malformed, the module
    does not import or the attribute is not callable.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"bad observer {spec!r}: expected module:function")
    try:
        module = import_from_cwd(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable (got {type(target).__name__})")
    observer: Observer = target
    return observer
