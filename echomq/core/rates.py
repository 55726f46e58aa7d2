"""Rates as people write them: ``"10/s"``, ``"600/1m"``, ``"5/250ms"`` -> ``(max, per_ms)``.

One reading for the task API (``@app.task(rate="10/s")``) and the CLI (``echomq rate``,
``echomq group rate``): at most ``max`` claims start in any window of ``per_ms`` ms, the
sliding-window log the claim script keeps on the SERVER clock. Pure: no clock, no I/O.

>>> parse("10/s"), parse("600/1m"), parse("5/250ms"), parse((3, 2_000))
((10, 1000), (600, 60000), (5, 250), (3, 2000))
>>> show((10, 1000)), show((5, 250))
('10/1s', '5/250ms')
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from typing import Any

from echomq.core.times import parse_duration

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\S+)\s*$")

Rate = tuple[int, int]


def parse(rate: Any) -> Rate:
    """``"MAX/DURATION"`` (a bare unit counts one of it: ``10/s`` is ``10/1s``), or a
    ``(max, per)`` pair with ``per`` in ms or a ``timedelta``, as ``(max, per_ms)``.
    ``ValueError`` (``TypeError`` for a value of the wrong kind) naming how to write it."""
    if isinstance(rate, tuple) and len(rate) == 2:
        count, per = rate
        if isinstance(per, dt.timedelta):
            per = per // dt.timedelta(milliseconds=1)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (count, per)):
            raise TypeError(f"a rate pair is (max, per_ms) of ints, not {rate!r}")
        return _checked(str(rate), count, per)
    if not isinstance(rate, str):
        raise TypeError(f"a rate is written 'MAX/DURATION' (e.g. '10/s', '600/1m') or given "
                        f"as (max, per_ms), not {type(rate).__name__}")
    m = _RATE.match(rate)
    if not m:
        raise ValueError(f"not a rate: {rate!r} (write MAX/DURATION, e.g. 10/1s or 600/1m)")
    count, window = int(m.group(1)), m.group(2)
    if window[:1].isalpha():  # "10/s": one of that unit
        window = "1" + window
    try:
        per_ms = parse_duration(window)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"not a rate: {rate!r}: {exc}") from None
    return _checked(repr(rate), count, per_ms)


def _checked(shown: str, count: int, per_ms: int) -> Rate:
    if count < 1:
        raise ValueError(f"a rate of {shown} would never start a job: MAX must be at least 1 "
                         "(pause the queue or group to stop it)")
    if per_ms < 1:
        raise ValueError(f"the window of {shown} must be at least 1ms")
    return count, per_ms


def show(rate: Rate | None) -> str:
    """``(10, 1000)`` -> ``"10/1s"`` (the largest whole unit); ``None`` -> ``"-"``."""
    if rate is None:
        return "-"
    count, per_ms = rate
    for unit, ms in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if per_ms % ms == 0:
            return f"{count}/{per_ms // ms}{unit}"
    return f"{count}/{per_ms}ms"
