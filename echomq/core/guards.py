"""Argument guards that run before any I/O: a bad argument raises before a byte is sent.

Time arguments are bounded too: a score past ~1e308 turns into ``inf`` in the server (a job
that silently never runs), and one past year 9999 breaks every ``datetime`` that reads it
back. So an instant (an absolute run-at, any clock) must lie within
``[-MAX_TIME_MS, MAX_TIME_MS]`` and a span added to now (a delay, a lease, an interval) must
keep now + span within year 9999; both raise ``ValueError`` beyond that. The span bound is
priced on the HOST wall clock (the server adds the span to its own ``TIME``; any skew
between the two is noise against eight thousand years).
"""

from __future__ import annotations

import math
import time

# 9999-12-31T23:59:59.999Z in epoch ms: the last instant a ``datetime`` can hold
MAX_TIME_MS = 253_402_300_799_999


def _shown(value: int) -> str:
    # a 10**400 in an error message is noise (and past 4300 digits str() itself refuses)
    return str(value) if value.bit_length() <= 64 else f"an int of {value.bit_length()} bits"


def integer(name: str, value: object) -> int:
    """``value`` if it is an int (not a bool), else ``TypeError`` (``ValueError`` for a
    float that is not finite: that is no time at all, whatever the type)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite int, got {value}")
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def non_negative(name: str, value: object) -> int:
    if integer(name, value) < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value  # type: ignore[return-value]


def positive(name: str, value: object) -> int:
    if integer(name, value) < 1:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value  # type: ignore[return-value]


def string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def payload(value: object, name: str = "payload") -> bytes | str:
    if not isinstance(value, (bytes, str)):
        raise TypeError(f"{name} must be bytes or str, not {type(value).__name__}")
    return value


def mode(value: object) -> str:
    if value != "in" and value != "at":
        raise ValueError(f"mode must be 'in' or 'at', not {value!r}")
    return str(value)


def max_span_ms() -> int:
    """The longest span (ms) that, added to HOST now, stays within year 9999."""
    return MAX_TIME_MS - time.time_ns() // 1_000_000


def instant(name: str, value: object) -> int:
    """An absolute instant in epoch ms (any clock) within ``[-MAX_TIME_MS, MAX_TIME_MS]``."""
    if abs(integer(name, value)) > MAX_TIME_MS:
        raise ValueError(f"{name} must be an epoch ms within year 9999 (|{name}| <= "
                         f"{MAX_TIME_MS}), got {_shown(value)}")  # type: ignore[arg-type]
    return value  # type: ignore[return-value]


def span(name: str, value: object, minimum: int | None = 0) -> int:
    """A span in ms added to now (a delay, a lease, an interval): at least ``minimum``
    (``None``: any past offset down to ``-MAX_TIME_MS``) and at most ``max_span_ms()``,
    priced on the HOST wall clock."""
    v = integer(name, value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {_shown(v)}")
    if v < -MAX_TIME_MS:
        raise ValueError(f"{name} must be >= {-MAX_TIME_MS}, got {_shown(v)}")
    limit = max_span_ms()
    if v > limit:
        raise ValueError(f"{name} must be at most {limit} ms (now + {name} must stay within "
                         f"year 9999), got {_shown(v)}")
    return v


def at_mode(name: str, mode: str, value: object) -> int:
    """A (mode, value) time pair: ``"at"`` an instant, ``"in"`` a span (any sign: a
    negative offset prices a run-at already past, due at the next promote)."""
    return instant(name, value) if mode == "at" else span(name, value, minimum=None)


MAX_PRIORITY = 1_000_000


def priority(value: object) -> int:
    """A job priority: an int 0..1_000_000 (lower runs first)."""
    if integer("priority", value) < 0 or value > MAX_PRIORITY:  # type: ignore[operator]
        raise ValueError(f"priority must be 0..{MAX_PRIORITY} (lower runs first), got {value}")
    return value  # type: ignore[return-value]
