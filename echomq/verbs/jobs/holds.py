"""Why a job waits: the one control that holds it and when it lets go (``why``).

Every control that holds a waiting job lives on the server (its run-at, a queue or group
pause, a group's concurrency limit, a rate window, its place in line, a flow parent's
children), so one read-only script (``why``) answers exactly, from one bounded read, on the
SERVER clock. ``Hold`` is the answer as data; ``Hold.words`` says it the way ``echomq why``,
``app.job(id).waiting_on`` and the dashboard's job page do:

- ``scheduled for 12:00:03 UTC (in 4.1 s)``
- ``queue paused until 13:00:00 UTC (in 58 m)`` / ``queue paused (until resumed)``
- ``group tenant-7 at its limit (2 of 2 running)``
- ``rate window full (10 per 1 s), reopens in 340 ms``
- ``behind 1,203 jobs of priority <= 0``
- ``waiting for 3 of 10 children``
- ``sleeping in step cool-off until 12:00:03 UTC (in 4.1 s)``
- ``waiting for signal approval:42 in step approve, times out at 13:00:00 UTC (in 58 m)``

and, for a job with a deadline, ``; expires in 2 m``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace, readings
from echomq.core.steps import Eval, Verb, single, text, verb


def span(ms: int) -> str:
    """A span of ms in words: ``340 ms``, ``4.1 s``, ``2 m``, ``3.5 h``, ``2 d``."""
    ms = max(0, int(ms))
    if ms < 1_000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{round(ms / 60_000)} m"
    if ms < 86_400_000:
        return f"{ms / 3_600_000:.1f} h"
    return f"{ms / 86_400_000:.1f} d"


def instant(ms: int, now: int) -> str:
    """An instant (epoch ms, SERVER clock) in UTC: the time of day when it is today's, the
    date too otherwise."""
    try:
        at = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    except (OverflowError, OSError, ValueError):  # a score past what a datetime holds
        return f"{ms} ms (epoch)"
    today = dt.datetime.fromtimestamp(now / 1000, dt.UTC).date()
    fmt = "%H:%M:%S UTC" if at.date() == today else "%Y-%m-%d %H:%M:%S UTC"
    return at.strftime(fmt)


def _until(ms: int, now: int) -> str:
    return f"{instant(ms, now)} (in {span(ms - now)})" if ms > now else "now"


@dataclass(frozen=True, slots=True)
class Hold:
    """What a ``why`` read found: the job's ``state`` (``None``: no row), SERVER ``now_ms``,
    its deadline ``expires_ms`` (if any), and for a waiting job the ``control`` that holds
    it (``scheduled``, ``sleep``, ``signal``, ``children``, ``paused``, ``blocked``,
    ``group-paused``, ``group-limit``, ``group-rate``, ``group-blocked``, ``rate``,
    ``behind``; ``None`` for a running or ended job) with its ``facts`` (ints where
    numbers, ``until_ms`` when it lets go at a known instant). ``after``: a recurrence
    occurrence its overlap policy holds until the one it follows ends."""

    state: str | None
    now_ms: int
    control: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    expires_ms: int | None = None
    lease_ms: int | None = None  # a running job's lease expiry (SERVER ms)

    @property
    def until_ms(self) -> int | None:
        """When the control lets go (SERVER ms), when an instant says so."""
        value = self.facts.get("until", self.facts.get("at"))
        return value if isinstance(value, int) else None

    @property
    def words(self) -> str | None:
        """The hold in words (see the module docstring); ``None`` for a job that does not
        wait (running, ended, or unknown)."""
        if self.control is None:
            return None
        now, f = self.now_ms, self.facts
        until = self.until_ms
        text_ = {
            "scheduled": lambda: f"scheduled for {_until(until or now, now)}",
            "sleep": lambda: f"sleeping in step {f['step']} until {_until(until or now, now)}",
            "signal": lambda: (f"waiting for signal {f['key']} in step {f['step']}, "
                               + (f"times out at {_until(until, now)}" if until
                                  else "no timeout")),
            "children": lambda: f"waiting for {f['left']} of {f['of']} children",
            "after": lambda: (f"held by its registration's overlap policy until occurrence "
                              f"{f['job']} ({f.get('its') or 'gone'}) ends"),
            "paused": lambda: ("queue paused until " + _until(until, now) if until
                               else "queue paused (until resumed)"),
            "blocked": lambda: f"queue rate-limited by its handler, reopens in "
                               f"{span((until or now) - now)}",
            "group-paused": lambda: (f"group {f['group']} paused until {_until(until, now)}"
                                     if until else
                                     f"group {f['group']} paused (until resumed)"),
            "group-limit": lambda: (f"group {f['group']} at its limit ({f['active']} of "
                                    f"{f['limit']} running)"),
            "group-rate": lambda: (f"group {f['group']} rate window full ({f['max']} per "
                                   f"{span(f['ms'])}), reopens in {span((until or now) - now)}"),
            "group-blocked": lambda: (f"group {f['group']} rate-limited by its handler, "
                                      f"reopens in {span((until or now) - now)}"),
            "rate": lambda: (f"rate window full ({f['max']} per {span(f['ms'])}), reopens in "
                             f"{span((until or now) - now)}"),
            "limit": lambda: f"queue at its limit ({f['active']} of {f['limit']} running)",
            "behind": self._behind,
        }[self.control]()
        if self.expires_ms is not None:
            text_ += (f"; expires in {span(self.expires_ms - now)}" if self.expires_ms > now
                      else "; past its deadline (it ends expired, never runs)")
        return text_

    def _behind(self) -> str:
        f = self.facts
        where = f" in group {f['group']}" if f.get("group") else ""
        if not f["n"]:
            return f"next in line{where}: claimable now, waiting for a free worker"
        jobs = "job" if f["n"] == 1 else "jobs"
        return f"behind {f['n']:,} {jobs} of priority <= {f['priority']}{where}"


def _num(value: str) -> Any:
    """A number the script read, as an int, clamped to the instants a ``datetime`` holds
    (as the run-at line reads a score: ``readings.score_ms``), so a score another client
    wrote past any instant (``1e300``, ``inf``) reads as year 9999, not a 300-digit span;
    text that is none stays text, so the words never raise on it."""
    try:
        f = float(value)
    except ValueError:
        return value
    return readings.score_ms(f) if abs(f) >= guard.MAX_TIME_MS else int(f)


_TEXTS = frozenset({"group", "job", "its", "step", "key"})  # facts that are names, never numbers


def hold_of(reply: Any) -> Hold:
    """The ``why`` script's reply as a ``Hold``."""
    pairs = [(text(reply[i]), text(reply[i + 1])) for i in range(0, len(reply), 2)]
    state, now, expires, control, lease = None, 0, None, None, None
    facts: dict[str, Any] = {}
    seen_hold = False
    for k, v in pairs:
        if seen_hold:
            facts[k] = _num(v) if v != "" and k not in _TEXTS else (v or None)
        elif k == "state":
            state = v or None
        elif k == "now":
            now = int(v)
        elif k == "expires":
            expires = _num(v)
        elif k == "lease" and v:
            lease = _num(v)
        elif k == "hold":
            control, seen_hold = v, True
    return Hold(state, now, control, facts, expires if isinstance(expires, int) else None,
                lease if isinstance(lease, int) else None)


@verb
def why(queue: str, job_id: str) -> Verb[Hold]:
    """What holds ``job_id`` on ``queue`` and when it lets go: one read-only script, one
    round trip, SERVER clock. See ``Hold``."""
    guard.string("job_id", job_id)
    step = Eval("why", (keyspace.job_key(queue, job_id),), (keyspace.base(queue), job_id))
    return single(step, hold_of)
