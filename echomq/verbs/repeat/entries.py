"""Registry entries: a ``Registration`` (a registration's name and next run with its
record decoded) as ``due``, ``records`` and ``get`` return it; its next runs; the HOST clock
every score is on."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, NamedTuple, TypeVar, overload

from echomq.core import cron as cronlib
from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.recurrence import excluded, exclusions, jitter_offset, next_slot
from echomq.core.steps import Batch, Command, Verb, scored, text, verb

F = TypeVar("F")


def now_ms() -> int:
    """The one clock every repeat score is priced on: the host's wall clock, in ms."""
    return time.time_ns() // 1_000_000


def entry_keys(queue: str, name: str) -> tuple[str, str]:
    guard.string("name", name)
    if not name:
        raise ValueError("a registration name must not be empty")
    return keyspace.queue_key(queue, "repeat"), keyspace.repeat_key(queue, name)


def scored_names(reply: Any) -> list[tuple[str, Any]]:
    """A ``WITHSCORES`` reply as ``(name, score)`` pairs, names decoded."""
    return [(text(m), score) for m, score in scored(reply)]


def entries_of(queue: str, members: list[tuple[str, Any]]) -> Verb[list[Registration]]:
    if not members:
        return []
    found = yield Batch(
        tuple(Command(("HGETALL", keyspace.repeat_key(queue, n))) for n, _ in members)
    )
    return [entry_of(n, score, rec) for (n, score), rec in zip(members, found, strict=True)]


# -- record decoding ----------------------------------------------------------------------

_INT_FIELDS = frozenset(
    {"every_ms", "fired", "limit", "start_at", "end_at", "window_ms", "cap", "last_at",
     "jitter_ms", "paused_until"}
)


class _Field(Generic[F]):
    """A typed read of one record field: its value when it has type ``kind``, else ``None``
    (absent, empty, or text where a number belongs)."""

    def __init__(self, kind: type[F], doc: str) -> None:
        self.kind = kind
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    @overload
    def __get__(self, entry: None, owner: type) -> _Field[F]: ...

    @overload
    def __get__(self, entry: Registration, owner: type) -> F | None: ...

    def __get__(self, entry: Registration | None, owner: type) -> Any:
        if entry is None:
            return self
        value = entry.get(self.key)
        ok = isinstance(value, self.kind) and not isinstance(value, bool) and value != ""
        return value if ok else None


class Registration(dict[str, Any]):
    """One registration as a read found it (``due``, ``records``, ``get``): the dict
    ``due`` returns, ``{"name", "next_at", ...record fields}``, with typed
    properties over the same fields.

    ``next_at`` is the next run (HOST ms; ``None`` once finished: ``limit`` reached or
    ``end_at`` past); the record's fields are decoded (the template as bytes, the numeric
    fields as int, ``paused`` as a bool, the others as str; a field the record lacks is
    absent). A plain ``dict`` subclass, so ``r["every_ms"]``, ``r.get("cron")``,
    ``{**r}``, ``r == {...}`` and JSON work as before; the properties answer ``None`` for an
    absent field, or where a hand-edited record holds text in place of a number (``plan``
    refuses that record).
    """

    __slots__ = ()

    next_at = _Field(int, "The next run (HOST ms), ``None`` once finished.")
    every_ms = _Field(int, "The interval cadence (ms), ``None`` for a cron registration.")
    cron = _Field(str, "The cron expression, ``None`` for an interval registration.")
    template = _Field(bytes, "The payload every occurrence carries.")
    limit = _Field(int, "The most occurrences it enqueues.")
    start_at = _Field(int, "No run before this (HOST epoch ms).")
    end_at = _Field(int, "No run after this (HOST epoch ms).")
    done = _Field(str, "``limit`` or ``ended`` once no further run comes.")
    last_id = _Field(str, "The id of the last occurrence enqueued.")
    last_at = _Field(int, "The slot (HOST ms) the last occurrence stands for.")
    jitter_ms = _Field(int, "Each occurrence's run-at moves by a deterministic amount below this.")
    paused_until = _Field(int, "A pause's end (SERVER ms): it resumes by itself then.")

    @property
    def overlap(self) -> str:
        """The overlap policy (``"allow"`` when none is stored)."""
        return str(self.get("overlap") or "allow")

    @property
    def exclude(self) -> list[str]:
        """The exclusions: ISO dates and cron expressions whose slots do not fire."""
        return exclusions(self)

    @property
    def name(self) -> str:
        return str(self["name"])

    @property
    def tz(self) -> str:
        """The IANA zone a cron expression is read in (``"UTC"`` when none is stored)."""
        return str(self.get("tz") or "UTC")

    @property
    def paused(self) -> bool:
        return bool(self.get("paused"))

    @property
    def fired(self) -> int:
        """Occurrences enqueued so far."""
        fired = self.get("fired")
        return fired if isinstance(fired, int) else 0


def entry_of(name: str, score: Any, record: Any) -> Registration:
    """A registry entry: the member's name and score with its record's fields decoded."""
    next_at = float(score)
    finite = math.isfinite(next_at)
    entry = Registration(name=name, next_at=int(next_at) if finite else None)
    for k, v in (record or {}).items():
        key = text(k)
        if key == "paused":
            entry[key] = True
        elif key == "template":
            entry[key] = v
        elif key in _INT_FIELDS:
            try:
                entry[key] = int(v)
            except ValueError:  # a hand-edited record: kept as text, refused by ``plan``
                entry[key] = text(v)
        else:
            entry[key] = text(v)
    return entry


@verb
def records(queue: str) -> Verb[list[Registration]]:
    """Every registration, soonest next run first (finished ones last, ``next_at=None``).

    The same entries as ``due``, each with ``paused`` (a bool). Reads only; no clock.
    """
    zset = keyspace.queue_key(queue, "repeat")

    def steps() -> Verb[list[Registration]]:
        members = yield Command(("ZRANGE", zset, 0, -1, "WITHSCORES"))
        entries = yield from entries_of(queue, scored_names(members))
        return [Registration({"paused": False, **e}) for e in entries]

    return steps()


@verb
def get(queue: str, name: str) -> Verb[Registration | None]:
    """One registration's entry (as ``records`` lists it), or ``None`` when no record has
    that name."""
    zset, record = entry_keys(queue, name)

    def steps() -> Verb[Registration | None]:
        score, fields = yield Batch((Command(("ZSCORE", zset, name)), Command(("HGETALL", record))))
        if not fields:
            return None
        entry = entry_of(name, score if score is not None else "inf", fields)
        return Registration({"paused": False, **entry})

    return steps()


def next_runs(
    record_or_expression: Mapping[str, Any] | str,
    count: int = 5,
    tz: str = "UTC",
    after: int | None = None,
) -> list[datetime]:
    """The next ``count`` runs, as aware datetimes (in the record's zone for a cron record).

    A cron expression: its runs in ``tz`` after ``after`` (HOST epoch ms, default HOST now).
    A record (an entry from ``due``, ``records`` or ``get``): its stored next run, then the
    following slots as a Pump on time would fire them, stopping at ``end_at`` and at the
    occurrence ``limit``. A finished record has none.
    """
    guard.positive("count", count)
    start = now_ms() if after is None else guard.instant("after", after)
    if isinstance(record_or_expression, str):
        zi = cronlib.zone(tz)
        first = datetime.fromtimestamp(start / 1000, UTC)
        return cronlib.parse(record_or_expression).runs(first, count, zi)
    entry = record_or_expression
    zi = cronlib.zone(entry.get("tz") or tz)
    return [datetime.fromtimestamp(s.slot / 1000, zi) for s in preview(entry, count)
            if not s.excluded]


class Slot(NamedTuple):
    """One slot of a registration's preview: its instant (HOST ms), whether an exclusion
    passes it over, and the run-at its occurrence gets (the slot plus its jitter)."""

    slot: int
    excluded: bool
    run_at: int


def preview(entry: Mapping[str, Any], count: int = 5) -> list[Slot]:
    """The registration's next slots as a Pump on time would meet them: ``count`` that
    fire, and between them the ones its exclusions pass over (marked ``excluded``), up to
    ``end_at`` and the occurrence ``limit``. A finished record has none."""
    guard.positive("count", count)
    if entry.get("next_at") is None or entry.get("done"):
        return []
    if entry.get("limit") is not None:
        count = min(count, entry["limit"] - entry.get("fired", 0))
    jitter = int(entry.get("jitter_ms") or 0)
    out: list[Slot] = []
    fired = passed = 0
    at = entry["next_at"]
    while (fired < count and passed < 10 * max(count, 1)
           and (entry.get("end_at") is None or at <= entry["end_at"])):
        skip = excluded(entry, at)
        off = 0 if skip else jitter_offset(str(entry.get("name", "")), at, jitter)
        out.append(Slot(at, skip, at + off))
        fired, passed = fired + (not skip), passed + skip
        at = next_slot(entry, at) if entry.get("cron") else at + entry["every_ms"]
    return out


@verb
def occurrences(queue: str, names: Sequence[str]) -> Verb[dict[str, int]]:
    """How many occurrences each named registration has enqueued (its ``fired`` field)."""
    keys = [entry_keys(queue, n)[1] for n in names]

    def steps() -> Verb[dict[str, int]]:
        replies = yield Batch(tuple(Command(("HGET", k, "fired")) for k in keys))
        return {n: int(r or 0) for n, r in zip(names, replies, strict=True)}

    return steps()
