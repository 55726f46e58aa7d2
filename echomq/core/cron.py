"""Cron expressions and their next run, computed on the HOST in an IANA time zone.

Five fields, ``minute hour day-of-month month day-of-week``, each a ``*``, a number, a
range ``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n``, or a comma list of those; months and
weekdays also by name (``JAN``, ``MON``); weekday 0 and 7 are both Sunday. When both
day-of-month and day-of-week are restricted a day matches either (classic cron). Aliases:
``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``),
``@hourly``.

Theory of operation. A cron expression names *wall-clock* minutes in a zone; a run is an
*instant*. ``zoneinfo`` supplies the mapping, and two days a year it is not one-to-one:

- spring forward (a gap): a wall time that does not exist that day. A job pinned to an
  hour (the hour field is not ``*``/``*/n``) runs once, at the first valid instant after
  the gap (the transition itself: 02:30 Paris on 2026-03-29 runs at 03:00 CEST). A job
  whose hour field is a wildcard simply has no run in the missing hour, because no real
  time elapsed there (``*/15 * * * *`` runs at 01:45 CET and then 03:00 CEST, 15 real
  minutes later).
- fall back (a fold): a wall time that happens twice. A job pinned to an hour runs once,
  at the first occurrence; a wildcard-hour job runs at both instants, since each is a
  distinct real time (an hourly job keeps its 60-minute cadence through the change).

This is Vixie cron's rule for fixed and wildcard jobs, stated per instant instead of per
clock jump, so it holds whether or not a process was running at the change. Everything
here is pure: the only clock is the ``after`` instant the caller passes (HOST ms).
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from echomq.core.times import epoch_ms

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {n.upper(): i for i, n in enumerate(calendar.month_abbr) if n}
_DAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
# (name, low, high, names) per field, in expression order.
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
# No zone shifts its offset by more than this in one transition; it bounds how far a wall
# time's instant can sit from the wall clock's own order.
_SHIFT = timedelta(hours=3)
# A day-of-month/month pair like 29 FEB can skip up to 8 years (2096 -> 2104).
_HORIZON_DAYS = 366 * 9
_UTC = UTC


class CronError(ValueError):
    """A cron expression or zone that cannot be used (raised before any I/O)."""


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (``CronError`` if the zone database does not know it)."""
    if not isinstance(name, str) or not name:
        raise CronError(f"time zone must be a non-empty IANA name, not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown time zone {name!r}") from exc


def _number(token: str, field: str, names: dict[str, int]) -> int:
    upper = token.upper()
    if upper in names:
        return names[upper]
    if not token.isdigit():
        raise CronError(f"{field}: {token!r} is not a number")
    return int(token)


def _parse_field(
    text: str, field: str, low: int, high: int, names: dict[str, int]
) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"{field}: empty list item in {text!r}")
        span, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise CronError(f"{field}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if span == "*":
            start, stop = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            start, stop = _number(a, field, names), _number(b, field, names)
        else:
            start = _number(span, field, names)
            # "a/n" means from a to the top of the range in steps of n
            stop = high if step_text else start
        if not (low <= start <= high and low <= stop <= high):
            raise CronError(f"{field}: {part!r} is outside {low}-{high}")
        if start > stop:
            raise CronError(f"{field}: range {part!r} runs backwards")
        values.update(range(start, stop + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the set of values each field admits."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_restricted: bool
    weekday_restricted: bool
    # True when the hour field is "*" or "*/n": such a job follows real time across DST
    # changes instead of being pinned to a wall-clock hour (see the module docstring).
    hour_wildcard: bool

    def _day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.day_restricted and self.weekday_restricted:
            return dom or dow
        return dom and dow

    def _instants(self, wall: datetime, tz: ZoneInfo) -> list[datetime]:
        """The UTC instants the wall time ``wall`` (naive, in ``tz``) runs at."""
        first = wall.replace(tzinfo=tz, fold=0)
        second = wall.replace(tzinfo=tz, fold=1)
        u0, u1 = first.astimezone(_UTC), second.astimezone(_UTC)
        if u0 == u1:
            return [u0]
        if u0.astimezone(tz).replace(tzinfo=None) == wall:
            # a fold: the wall time happens twice (u0 is the earlier instant)
            return [u0, u1] if self.hour_wildcard else [u0]
        # a gap: the wall time never happens that day
        return [] if self.hour_wildcard else [_gap_end(wall, tz, min(u0, u1), max(u0, u1))]

    def _walls(self, start: datetime) -> Iterator[datetime]:
        """The matching wall times at or after ``start`` (naive), in wall-clock order."""
        hours, minutes = sorted(self.hours), sorted(self.minutes)
        first = start.date()
        for offset in range(_HORIZON_DAYS):
            d = first + timedelta(days=offset)
            if not self._day_matches(d):
                continue
            for h in hours:
                if offset == 0 and h < start.hour:
                    continue
                for m in minutes:
                    if offset == 0 and h == start.hour and m < start.minute:
                        continue
                    yield datetime(d.year, d.month, d.day, h, m)

    def next_after(self, after: datetime, tz: str | ZoneInfo = "UTC") -> datetime:
        """The first run strictly after ``after`` (an aware datetime), aware in ``tz``."""
        zi = zone(tz) if isinstance(tz, str) else tz
        if after.tzinfo is None:
            raise CronError("after must be an aware datetime (or use next_ms)")
        after_utc = after.astimezone(_UTC)
        after_wall = after_utc.astimezone(zi).replace(tzinfo=None)
        best: datetime | None = None
        best_wall: datetime | None = None
        # Only a fall-back ahead can give an earlier wall time a later instant; with none
        # in reach, the scan starts at the wall clock of ``after`` itself.
        fold_ahead = (after_utc + _SHIFT).astimezone(zi).utcoffset() != _offset_at(
            after_utc, zi
        )
        start = after_wall - _SHIFT if fold_ahead else after_wall
        for wall in self._walls(start):
            if best_wall is not None and wall > best_wall + _SHIFT:
                break
            found = self._instants(wall, zi)
            for instant in found:
                if instant > after_utc and (best is None or instant < best):
                    best, best_wall = instant, wall
            if (
                best is not None
                and len(found) == 1
                and found[0] > best
                and found[0].astimezone(zi).utcoffset() == best.astimezone(zi).utcoffset()
            ):
                # a plain wall time past the best, on the same offset: from here on wall
                # order is instant order, so nothing later can beat it
                break
        if best is None:
            raise CronError(f"{self.expression!r} has no run in the next {_HORIZON_DAYS} days")
        return best.astimezone(zi)

    def next_ms(self, after_ms: int, tz: str | ZoneInfo = "UTC") -> int:
        """The first run strictly after ``after_ms`` (epoch ms), as epoch ms."""
        after = datetime.fromtimestamp(after_ms / 1000, _UTC)
        # datetime keeps microseconds; a run is always on a whole minute, so ms is exact
        return epoch_ms(self.next_after(after, tz))

    def matches(self, at_ms: int, tz: str | ZoneInfo = "UTC") -> bool:
        """Whether the instant ``at_ms`` (epoch ms) falls in a minute this expression names,
        read on the wall clock of ``tz`` (an exclusion: ``* * 25 12 *`` is all of Dec 25)."""
        zi = zone(tz) if isinstance(tz, str) else tz
        wall = datetime.fromtimestamp(at_ms / 1000, _UTC).astimezone(zi)
        return (wall.minute in self.minutes and wall.hour in self.hours
                and self._day_matches(wall.date()))

    def runs(self, after: datetime, count: int, tz: str | ZoneInfo = "UTC") -> list[datetime]:
        """The next ``count`` runs strictly after ``after``, aware in ``tz``."""
        out: list[datetime] = []
        at = after
        for _ in range(count):
            at = self.next_after(at, tz)
            out.append(at)
        return out


def _offset_at(instant: datetime, tz: ZoneInfo) -> timedelta | None:
    """The UTC offset in force in ``tz`` at ``instant``."""
    return instant.astimezone(tz).utcoffset()


def _gap_end(wall: datetime, tz: ZoneInfo, lo: datetime, hi: datetime) -> datetime:
    """The first instant whose wall clock is at or past ``wall``: the end of the gap.

    ``lo`` maps to a wall time before the gap and ``hi`` to one after it, and the wall
    clock only jumps forward between them, so a bisection on whole seconds finds it.
    """
    low, high = int(lo.timestamp()), int(hi.timestamp())
    while low < high:
        mid = (low + high) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            high = mid
        else:
            low = mid + 1
    return datetime.fromtimestamp(low, _UTC)


@lru_cache(maxsize=256)
def parse(expression: str) -> Cron:
    """Parse a 5-field expression or an ``@alias``; ``CronError`` (a ``ValueError``) if bad."""
    if not isinstance(expression, str):
        raise TypeError(f"a cron expression must be a str, not {type(expression).__name__}")
    text = " ".join(expression.split())
    text = ALIASES.get(text.lower(), text)
    if text.startswith("@"):
        raise CronError(f"unknown cron alias {expression!r}; known: {', '.join(ALIASES)}")
    parts = text.split(" ")
    if len(parts) != 5:
        raise CronError(
            f"a cron expression has 5 fields (minute hour day month weekday), "
            f"got {len(parts)} in {expression!r}"
        )
    values = [
        _parse_field(part, name, low, high, names)
        for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)
    ]
    weekdays = frozenset(d % 7 for d in values[4])
    cron = Cron(
        expression=text,
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=weekdays,
        day_restricted=not parts[2].startswith("*"),
        weekday_restricted=not parts[4].startswith("*"),
        hour_wildcard=parts[1].startswith("*"),
    )
    if not (cron.day_restricted and cron.weekday_restricted):
        # an AND of day-of-month and month must be satisfiable in some month
        longest = max(29 if m == 2 else calendar.monthrange(2001, m)[1] for m in cron.months)
        if cron.day_restricted and min(cron.days) > longest:
            raise CronError(f"{expression!r} never runs: no such day in the chosen months")
    return cron


def validate(expression: str) -> str:
    """The normalized expression (aliases expanded), or ``CronError``."""
    return parse(expression).expression


def next_ms(expression: str, after_ms: int, tz: str = "UTC") -> int:
    """The first run of ``expression`` in ``tz`` strictly after ``after_ms`` (HOST epoch ms)."""
    return parse(expression).next_ms(after_ms, tz)


def next_runs(
    expression: str, count: int = 5, tz: str = "UTC", after: datetime | None = None
) -> list[datetime]:
    """The next ``count`` runs of ``expression`` in ``tz``, after ``after`` (default: HOST
    now), as aware datetimes in that zone."""
    start = after if after is not None else datetime.now(_UTC)
    return parse(expression).runs(start, count, tz)
