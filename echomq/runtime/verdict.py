"""What a failed run means for its job: retried (after which delay) or dead now, and why.

The consumer's settler asks ``judge(route, error)`` for every run that ended in an error
(an exception, a timeout). The rules, in order:

1. ``Fail`` raised: dead now (reason ``"fail"``).
2. ``Retry`` raised: retried after its own delay (reason ``"retry"``), spending an attempt
   like any failure, whatever ``retry_on`` says.
3. The error is an instance of a class in the task's ``dont_retry_on`` (subclasses
   included): dead now (``"dont_retry_on"``). ``dont_retry_on`` wins over ``retry_on``.
4. The task names ``retry_on`` and the error is an instance of none of them: dead now
   (``"retry_on"``).
5. Otherwise: retried after the backoff's delay (``"backoff"``), the default for every
   exception, until ``max_attempts`` runs (delays not counted) are spent (``"exhausted"``).

A timeout is a ``TimeoutError`` (an ``OSError``) for these rules. An error from a child
process (``isolation="process"``) matches by its classes' qualified names. Pure: no I/O.
"""

from __future__ import annotations

import os
import traceback as tb
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from echomq.runtime.handler import Fail, Retry

#: the reasons a job is dead, as the ``dead`` event's ``reason`` and the log line say them
DEAD_REASONS = ("exhausted", "fail", "dont_retry_on", "retry_on")
#: the reasons a job is retried, as the ``retrying`` event's ``reason``
RETRY_REASONS = ("backoff", "retry")

Classes = tuple[type[BaseException], ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    """``final``: dead now, whatever attempts are left; ``reason`` (see the module doc);
    ``delay_ms``: the retry's own delay (``Retry``), ``None`` for the backoff's; ``error``:
    the text kept on the row."""

    final: bool
    reason: str
    delay_ms: int | None
    error: str


def error_text(error: BaseException) -> str:
    """``Type: text``, the form every error is kept and logged in."""
    if isinstance(error, Retry):
        return error.error_text()
    return f"{type(error).__name__}: {error}"


#: the longest traceback a row keeps (its tail: the innermost frames and the exception line)
MAX_TRACEBACK_CHARS = 8_192


def formatted(error: BaseException, limit: int = MAX_TRACEBACK_CHARS) -> str:
    """``error``'s formatted traceback (its causes included; a child process's as the
    child formatted it), at most ``limit`` characters: past that, its first line, a
    marker, and the tail, so the innermost frames and the exception line are kept."""
    text = getattr(error, "formatted", None)
    if not isinstance(text, str) or not text:
        text = "".join(tb.format_exception(type(error), error, _from_handler(error)))
    text = text.rstrip("\n")
    if len(text) <= limit:
        return text
    head = text.split("\n", 1)[0]
    mark = f"\n  ... ({len(text) - limit} characters cut) ...\n"
    return head + mark + text[len(text) - (limit - len(head) - len(mark)):]


#: where the frames that call a handler live (this package, the thread pool's): left out of
#: the top of a kept traceback, which starts at the handler's own frame
_CALLERS = (str(Path(__file__).resolve().parents[1]) + os.sep,
            os.sep + os.path.join("concurrent", "futures") + os.sep)


def _from_handler(error: BaseException) -> TracebackType | None:
    """``error``'s traceback from the first frame that is not the runtime calling the
    handler (the whole of it when every frame is: an error raised by the runtime)."""
    first = error.__traceback__
    frame = first
    while frame is not None and any(c in frame.tb_frame.f_code.co_filename
                                    for c in _CALLERS):
        frame = frame.tb_next
    return frame if frame is not None else first


def judge(error: BaseException, retry_on: Classes | None = None,
          dont_retry_on: Classes = ()) -> Verdict:
    """The verdict on a run that ended in ``error`` under these rules (module doc)."""
    text = error_text(error)
    if isinstance(error, Fail):
        return Verdict(True, "fail", None, text)
    if isinstance(error, Retry):
        return Verdict(False, "retry", error.delay_ms, text)
    if dont_retry_on and matches(error, dont_retry_on):
        return Verdict(True, "dont_retry_on", None, text)
    if retry_on is not None and not matches(error, retry_on):
        return Verdict(True, "retry_on", None, text)
    return Verdict(False, "backoff", None, text)


def matches(error: BaseException, classes: Classes) -> bool:
    """``isinstance(error, classes)``, or for a child process's error, one of ``classes``
    is named in its lineage."""
    if isinstance(error, classes):
        return True
    lineage = getattr(error, "lineage", ())
    return bool(lineage) and any(f"{c.__module__}.{c.__qualname__}" in lineage
                                 for c in classes)


def exception_classes(name: str, value: Any) -> Classes | None:
    """``retry_on=`` / ``dont_retry_on=`` as a tuple of exception classes (one class may be
    given bare); ``None`` stays ``None``. ``TypeError`` for anything else, at declaration."""
    if value is None:
        return None
    items: Iterable[Any] = (value,) if isinstance(value, type) else value
    try:
        got = tuple(items)
    except TypeError:
        raise TypeError(f"{name} takes exception classes (a class or a tuple of them), "
                        f"not {type(value).__name__}") from None
    for cls in got:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise TypeError(f"{name} takes exception classes (e.g. {name}=(OSError,)), "
                            f"not {cls!r}")
    return got


def describe(reason: str) -> str:
    """The words a log line adds for a death that was not the budget running out."""
    return {"fail": ", not retried (Fail)",
            "dont_retry_on": ", not retried (dont_retry_on)",
            "retry_on": ", not retried (not in retry_on)"}.get(reason, "")
