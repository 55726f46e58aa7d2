"""Reading what is stored as it is: numbers and instants from rows and scores that another
client (or a bug) may have written, without ever raising.

A reader (``app.job``, ``echomq job``, the dashboard, ``/metrics``) shows a queue; it must
show a hostile value, not fail on it. A sorted-set score may be ``inf`` or ``1e300`` (any
client can ``ZADD``), a row field ``"many"``. Here a score becomes integer ms clamped to the
instants a ``datetime`` can hold (``MIN_SHOWN_MS`` .. ``guards.MAX_TIME_MS``: year 1 to year
9999), a count that is no number reads as a default, and ``note_*`` say in words what was
off, for the reader to show beside the value. The transitions themselves refuse to write
such times (``guards`` in Python, ``includes/price.lua`` in the scripts, the native
module's due check); this module is for what got there anyway.

No clock, no I/O.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from echomq.core.guards import MAX_TIME_MS

#: 0001-01-01T00:00:00Z in epoch ms: the first instant a ``datetime`` can hold
MIN_SHOWN_MS = -62_135_596_800_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def text_of(value: Any) -> str:
    """A reply element as ``str``, undecodable bytes replaced (never raises)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


_text = text_of


def number(value: Any) -> float | None:
    """``value`` (bytes, str or a number) as a float, or ``None`` when it is no number
    (``nan`` included: no reader can order it)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        f = float(value)
    else:
        try:
            f = float(_text(value).strip())
        except ValueError:
            return None
    return None if math.isnan(f) else f


def in_range(value: Any) -> bool:
    """Whether ``value`` is a number a reader can show as an instant as it is."""
    f = number(value)
    return f is not None and MIN_SHOWN_MS <= f <= MAX_TIME_MS


def score_ms(value: Any) -> int:
    """A sorted-set score (or a stored ms) as integer ms, clamped to
    ``[MIN_SHOWN_MS, MAX_TIME_MS]``: ``inf`` and ``1e300`` read as the last instant of year
    9999, ``-inf`` as the first of year 1; something that is no number reads as 0."""
    f = number(value)
    if f is None:
        return 0
    if f >= MAX_TIME_MS:
        return MAX_TIME_MS
    if f <= MIN_SHOWN_MS:
        return MIN_SHOWN_MS
    return int(f)


def whole(value: Any, default: int | None = None) -> int | None:
    """A stored count (``attempts``, ``priority`` ...) as an int, or ``default`` when it is
    missing, empty or no finite number."""
    if value is None:
        return default
    s = _text(value).strip()
    try:
        return int(s)
    except ValueError:
        f = number(s)
        return int(f) if f is not None and math.isfinite(f) else default


def instant(ms: int) -> dt.datetime:
    """An aware UTC ``datetime`` for ``ms`` (clamped as ``score_ms``; exact integer
    arithmetic, any platform)."""
    return _EPOCH + dt.timedelta(milliseconds=score_ms(ms))


def note_score(what: str, value: Any) -> str | None:
    """Words for a score no reader can show as it is (``None`` when it can)."""
    if value is None or in_range(value):
        return None
    f = number(value)
    shown = _text(value) if f is None else repr(f)
    return (f"{what} score {shown} is no time within years 1..9999 (written by another "
            f"client?): shown as {instant(score_ms(value)).isoformat(timespec='milliseconds')}")


def note_field(name: str, value: Any) -> str | None:
    """Words for a count field that is not an int (``None`` when it is, or is absent)."""
    if value is None or value == "" or _is_int(value):
        return None
    return f"{name} {_text(value)!r} is not a number"


def _is_int(value: Any) -> bool:
    try:
        int(_text(value).strip())
    except ValueError:
        return False
    return True
