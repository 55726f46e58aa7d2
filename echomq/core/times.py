"""Time converters: durations and instants from what callers give, as integer ms.

One home for every conversion the API, the CLI and the planner make, so that a
``timedelta``, a ``datetime`` and a CLI word are read the same way everywhere.

Clocks: nothing here reads a clock except the naive-``datetime`` case, which is taken in
the CALLER's local zone (or the zone the caller names); every result is plain epoch ms or
a span in ms, priced against whichever clock the verb receiving it uses.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from zoneinfo import ZoneInfo

from echomq.core import guards as guard

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_MS = dt.timedelta(milliseconds=1)
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def epoch_ms(instant: dt.datetime) -> int:
    """An aware ``datetime`` (naive = local time) as epoch ms, floored to the ms.

    Exact integer arithmetic: a float timestamp rounds ``datetime.max`` past year 9999.
    """
    aware = instant if instant.tzinfo is not None else instant.astimezone()
    return (aware - _EPOCH) // _ONE_MS


def to_ms(value: int | dt.timedelta) -> int:
    """A duration in ms from an int (ms) or a ``timedelta``."""
    if isinstance(value, dt.timedelta):
        return int(value / _ONE_MS)
    return guard.integer("ms", value)


def span_ms(name: str, value: int | dt.timedelta | None) -> int | None:
    """A non-negative span in ms from an int (ms) or a ``timedelta``; ``None`` stays."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return guard.span(name, value // _ONE_MS)
    return guard.span(name, value)


def seconds_to_ms(name: str, value: float | dt.timedelta | None) -> int | None:
    """A positive duration given in seconds (int/float) or as a ``timedelta``, in ms;
    ``None`` stays ``None`` (the setting is off). ``ValueError``/``TypeError`` otherwise."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        ms = int(value / _ONE_MS)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        ms = int(value * 1000)
    else:
        raise TypeError(f"{name} must be seconds (int or float) or a timedelta, "
                        f"not {type(value).__name__}")
    if ms <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return ms


def to_epoch_ms(value: int | dt.datetime) -> int:
    """An absolute instant in epoch ms from an int or a ``datetime`` (naive = local time)."""
    if isinstance(value, dt.datetime):
        return epoch_ms(value)
    return guard.integer("at", value)


def instant_in_zone_ms(label: str, value: object, zone: ZoneInfo) -> int:
    """``value`` as epoch ms: an int is taken as ms; a naive datetime is read in ``zone``."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=zone)
        return guard.instant(label, int(aware.timestamp() * 1000))
    return guard.instant(label, value)


def parse_duration(text: str) -> int:
    """``"5s"``, ``"250ms"``, ``"2m"``, ``"1.5h"``, ``"1d"`` → ms. A unit is required (a
    bare ``5`` could be seconds or ms) and a duration is never negative."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (use a number and a unit: 5s, 250ms, 2m, 1h, 1d)")
    number, unit = m.group(1), m.group(2)
    if unit is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} needs a unit: {number}s for seconds or {number}ms for milliseconds "
            "(also m, h, d)")
    if number.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is negative: a duration counts forward from now (e.g. {number[1:]}{unit})")
    return int(float(number) * _UNIT_MS[unit])


def parse_instant(text: str) -> int:
    """Epoch ms, or an ISO-8601 datetime (naive = local time) → epoch ms."""
    if re.fullmatch(r"-?\d+", text.strip()):
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an instant: {text!r} (ISO-8601 or ms)") from None
    return int(when.timestamp() * 1000)
