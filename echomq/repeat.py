"""The recurrence registry: a registration, not a loop. Every score is HOST-clock ms.

``register``, ``due`` and ``advance`` read the host's wall clock (``time.time()``), where
the schedule set and promote read the server's ``TIME``. A late tick does not pile up a
backlog: ``advance`` measures the next run from the host's now, not from the old score.

Beyond the seed (which is at least once per due period, by ``due`` then ``advance``):

- ``fire`` is one atomic transition (the ``fire`` script): it checks that the name's score
  is still the one the caller read, enqueues the occurrence under a HOST-minted id as a
  normal pending job, and moves the name to its next run. Two pumps that read the same due
  record enqueue it once; a pump that dies mid-fire leaves nothing or everything. So the
  Pump (``sweep``) gives exactly one occurrence per due period.
- ``register_cron`` and ``upsert`` add cron cadences in an IANA zone (``echomq.cron``),
  ``start_at``/``end_at``/``limit``, a missed-run policy (``catchup``) and an ``overlap``
  policy, all stored on the record. Re-registering the same definition is a no-op, a
  changed one is an explicit ``upsert`` ("updated").

Record fields (``emq:{q}:repeat:<name>``): the definition ``every_ms`` | ``cron`` + ``tz``,
``template``, ``start_at``, ``end_at``, ``limit``, ``catchup``, ``window_ms``, ``cap``,
``overlap``; runtime ``fired`` (occurrences enqueued), ``last_id``, ``last_at`` (the slot
the last occurrence stands for), ``done`` (``limit`` | ``ended``: no further run; the
member is parked at ``+inf`` on the repeat set, where no due read reaches it) and
``paused`` (``pause``: the score is kept but ``fire`` refuses the name until ``resume``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from . import _guards as guard
from . import cron as cronlib
from . import errors, ids, keyspace
from ._time import instant_in_zone_ms
from .outcomes import Outcome
from .recurrence import DEFAULT_ALL_WINDOW_MS as DEFAULT_ALL_WINDOW_MS
from .recurrence import DEFAULT_CAP as DEFAULT_CAP
from .recurrence import DEFAULT_SKIP_WINDOW_MS as DEFAULT_SKIP_WINDOW_MS
from .recurrence import Plan as Plan
from .recurrence import next_slot
from .recurrence import plan as plan
from .steps import Batch, Command, Eval, Verb, scored, single, text, verb


def now_ms() -> int:
    """The one clock every repeat score is priced on: the host's wall clock, in ms."""
    return time.time_ns() // 1_000_000


def _keys(queue: str, name: str) -> tuple[str, str]:
    guard.string("name", name)
    if not name:
        raise ValueError("a registration name must not be empty")
    return keyspace.queue_key(queue, "repeat"), keyspace.repeat_key(queue, name)


@verb
def register(
    queue: str,
    name: str,
    every_ms: int,
    template: bytes | str,
    first_in_ms: int = 0,
) -> Verb[Outcome]:
    """Register ``name`` every ``every_ms``; first run at HOST now + ``first_in_ms``.

    ``"registered"``, or ``"exists"`` when a live record has that name (nothing written).
    """
    keys = _keys(queue, name)
    guard.span("every_ms", every_ms, minimum=1)
    guard.payload(template, "template")
    guard.span("first_in_ms", first_in_ms)
    first_at = now_ms() + first_in_ms
    step = Eval("register", keys, (name, str(every_ms), template, str(first_at)))
    return single(step, lambda r: Outcome.REGISTERED if int(r) == 1 else Outcome.EXISTS)


@verb
def cancel(queue: str, name: str) -> Verb[int]:
    """Remove the registration (record and member); 1 if a record was removed, else 0."""
    zset, record = _keys(queue, name)

    def steps() -> Verb[int]:
        replies = yield Batch((Command(("ZREM", zset, name)), Command(("DEL", record))))
        return int(replies[1])

    return steps()


@verb
def pause(queue: str, name: str) -> Verb[Outcome]:
    """Pause ``name``: ``"paused"``, or ``"absent"`` when no record has that name.

    No clock. The record and its next-run score stay as they are; ``fire`` (so the Pump's
    ``sweep``) refuses a paused name, so no occurrence is minted until ``resume``. Pausing
    a paused registration is a no-op.
    """
    step = Eval("repeat_hold", _keys(queue, name), (name, "pause", ""))
    return single(step, lambda r: Outcome.PAUSED if int(r) == 1 else Outcome.ABSENT)


@verb
def resume(queue: str, name: str) -> Verb[Outcome]:
    """Resume a paused ``name``: ``"resumed"``, or ``"absent"`` when no record has that name.

    HOST clock: the next run is re-armed from HOST now per the definition, as a fresh
    registration would be (an interval is due at once, a cron at its next slot after now,
    never before ``start_at``; parked ``ended`` when ``end_at`` is past), so the runs
    missed while paused are not caught up. A finished registration stays finished;
    resuming one that is not paused changes nothing.
    """
    keys = _keys(queue, name)

    def steps() -> Verb[Outcome]:
        fields = yield Command(("HGETALL", keys[1]))
        if not fields:
            return Outcome.ABSENT
        entry = _entry(name, "inf", fields)
        at: int | None = None
        if entry.get("cron") or entry.get("every_ms"):
            d: dict[str, bytes | str] = {
                "cron": entry.get("cron") or "",
                "tz": entry.get("tz") or "UTC",
                "start_at": str(entry.get("start_at") or ""),
                "end_at": str(entry.get("end_at") or ""),
            }
            at = _first_at(d, now_ms(), 0)
        reply = yield Eval("repeat_hold", keys, (name, "resume", "" if at is None else str(at)))
        return Outcome.RESUMED if int(reply) == 1 else Outcome.ABSENT

    return steps()


@verb
def due(queue: str, now: int | None = None) -> Verb[list[dict[str, Any]]]:
    """Registrations scored at or before HOST now, each with its record.

    Host commands, not a script: ``ZRANGEBYSCORE`` then one pipelined ``HGETALL`` each.
    Each entry: ``{"name", "next_at", "every_ms", "template", ...record fields}`` (the
    template as bytes, the numeric fields as int, the others as str). A member whose record
    is gone is still listed (with no ``every_ms``) so a sweep can drop it.
    """
    keyspace.validate_queue(queue)
    at = now_ms() if now is None else guard.instant("now", now)
    return due_verb(queue, at)


def _scored(reply: Any) -> list[tuple[str, Any]]:
    """A ``WITHSCORES`` reply as ``(name, score)`` pairs, names decoded."""
    return [(text(m), score) for m, score in scored(reply)]


def _entries(queue: str, members: list[tuple[str, Any]]) -> Verb[list[dict[str, Any]]]:
    if not members:
        return []
    found = yield Batch(
        tuple(Command(("HGETALL", keyspace.repeat_key(queue, n))) for n, _ in members)
    )
    return [_entry(n, score, rec) for (n, score), rec in zip(members, found, strict=True)]


def due_verb(queue: str, at: int, limit: int | None = None) -> Verb[list[dict[str, Any]]]:
    """The steps of ``due`` at HOST ms ``at``, the ``limit`` most overdue when given (a
    generator other verbs ``yield from``)."""
    zset = keyspace.queue_key(queue, "repeat")
    read: tuple[str | int, ...] = ("ZRANGEBYSCORE", zset, "-inf", at, "WITHSCORES")
    if limit is not None:
        read += ("LIMIT", 0, limit)
    members = yield Command(read)
    return (yield from _entries(queue, _scored(members)))


@verb
def advance(queue: str, name: str, every_ms: int) -> Verb[Outcome]:
    """Set ``name``'s next run to HOST now + ``every_ms``: ``"advanced"``, or ``"absent"``
    (the record was cancelled mid-sweep; the dangling member is removed)."""
    keys = _keys(queue, name)
    guard.span("every_ms", every_ms, minimum=1)
    step = Eval("advance", keys, (name, str(now_ms() + every_ms)))
    return single(step, lambda r: Outcome.ADVANCED if int(r) == 1 else Outcome.ABSENT)


@verb
def count(queue: str) -> Verb[int]:
    """The registry depth: how many names are registered."""
    step = Command(("ZCARD", keyspace.queue_key(queue, "repeat")))
    return single(step, int)


# -- record decoding ----------------------------------------------------------------------

_INT_FIELDS = frozenset(
    {"every_ms", "fired", "limit", "start_at", "end_at", "window_ms", "cap", "last_at"}
)


def _entry(name: str, score: Any, record: Any) -> dict[str, Any]:
    """A registry entry: the member's name and score with its record's fields decoded."""
    next_at = float(score)
    finite = math.isfinite(next_at)
    entry: dict[str, Any] = {"name": name, "next_at": int(next_at) if finite else None}
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
def records(queue: str) -> Verb[list[dict[str, Any]]]:
    """Every registration, soonest next run first (finished ones last, ``next_at=None``).

    The same entry shape as ``due``, plus ``paused`` (a bool). Reads only; no clock.
    """
    zset = keyspace.queue_key(queue, "repeat")

    def steps() -> Verb[list[dict[str, Any]]]:
        members = yield Command(("ZRANGE", zset, 0, -1, "WITHSCORES"))
        entries = yield from _entries(queue, _scored(members))
        return [{"paused": False, **e} for e in entries]

    return steps()


@verb
def get(queue: str, name: str) -> Verb[dict[str, Any] | None]:
    """One registration's entry (as ``records`` lists it), or ``None`` when no record has
    that name."""
    zset, record = _keys(queue, name)

    def steps() -> Verb[dict[str, Any] | None]:
        score, fields = yield Batch((Command(("ZSCORE", zset, name)), Command(("HGETALL", record))))
        if not fields:
            return None
        return {"paused": False, **_entry(name, score if score is not None else "inf", fields)}

    return steps()


# -- definitions: register_cron and upsert ------------------------------------------------

CATCHUP = ("skip", "latest", "all")
OVERLAP = ("allow", "skip")
MAX_WINDOW_MS = 31 * 86_400_000
MAX_CAP = 1_000
# The definition, in the order the upsert script compares it; runtime fields are not here.
DEFINITION = (
    "every_ms", "cron", "tz", "template", "start_at", "end_at",
    "limit", "catchup", "window_ms", "cap", "overlap",
)  # fmt: skip


def definition(
    template: bytes | str,
    every_ms: int | None,
    cron: str | None,
    tz: str,
    start_at: int | datetime | None,
    end_at: int | datetime | None,
    limit: int | None,
    catchup: str | None,
    window_ms: int | None,
    cap: int | None,
    overlap: str,
) -> dict[str, bytes | str]:
    """The canonical definition (``""`` = absent) as the upsert script stores it.

    Every guard of ``register_cron``/``upsert`` runs here, before any I/O, so a caller (the
    CLI) can refuse a bad definition before it connects. Reads no clock.
    """
    guard.payload(template, "template")
    if (every_ms is None) == (cron is None):
        raise ValueError("give exactly one cadence: every_ms or cron")
    guard.string("tz", tz)
    cronlib.zone(tz)
    d: dict[str, bytes | str] = dict.fromkeys(DEFINITION, "")
    d["template"] = template
    if every_ms is not None:
        d["every_ms"] = str(guard.span("every_ms", every_ms, minimum=1))
    else:
        guard.string("cron", cron)
        assert cron is not None
        cronlib.parse(cron)
        d["cron"] = " ".join(cron.split())
        d["tz"] = tz
    start = None if start_at is None else instant_in_zone_ms("start_at", start_at, cronlib.zone(tz))
    end = None if end_at is None else instant_in_zone_ms("end_at", end_at, cronlib.zone(tz))
    if start is not None and end is not None and end < start:
        raise ValueError("end_at must not be before start_at")
    d["start_at"] = "" if start is None else str(start)
    d["end_at"] = "" if end is None else str(end)
    if limit is not None:
        d["limit"] = str(guard.positive("limit", limit))
    if catchup not in (None, "", *CATCHUP):
        raise ValueError(f"catchup must be one of {', '.join(CATCHUP)} (or None), not {catchup!r}")
    d["catchup"] = catchup or ""
    if window_ms is not None:
        if catchup not in ("skip", "all"):
            raise ValueError("window_ms applies to catchup='skip' or catchup='all' only")
        if guard.positive("window_ms", window_ms) > MAX_WINDOW_MS:
            raise ValueError(f"window_ms must be at most {MAX_WINDOW_MS} (31 days)")
        d["window_ms"] = str(window_ms)
    if cap is not None:
        if catchup != "all":
            raise ValueError("cap applies to catchup='all' only")
        if guard.positive("cap", cap) > MAX_CAP:
            raise ValueError(f"cap must be at most {MAX_CAP}")
        d["cap"] = str(cap)
    if overlap not in OVERLAP:
        raise ValueError(f"overlap must be 'allow' or 'skip', not {overlap!r}")
    d["overlap"] = "" if overlap == "allow" else overlap
    return d


def _first_at(d: dict[str, bytes | str], now: int, first_in_ms: int) -> int | None:
    """The first run of a definition registered at HOST ``now``; ``None`` if it has none."""
    start = int(d["start_at"]) if d["start_at"] else None
    if d["cron"]:
        after = now if start is None else max(now, start - 1)
        first = cronlib.next_ms(str(d["cron"]), after, str(d["tz"]))
    else:
        first = now + first_in_ms
        if start is not None:
            first = max(first, start)
    if d["end_at"] and first > int(d["end_at"]):
        return None
    return first


def _write(
    queue: str, name: str, mode: str, d: dict[str, bytes | str], first_in_ms: int
) -> Eval:
    first = _first_at(d, now_ms(), first_in_ms)
    args: list[bytes | str] = [name, mode, "" if first is None else str(first)]
    for field in DEFINITION:
        args += [field, d[field]]
    return Eval("upsert", _keys(queue, name), tuple(args))


_WRITTEN = {0: Outcome.EXISTS, 1: Outcome.REGISTERED, 2: Outcome.UPDATED}


@verb
def register_cron(
    queue: str,
    name: str,
    expression: str,
    template: bytes | str,
    tz: str = "UTC",
    start_at: int | datetime | None = None,
    end_at: int | datetime | None = None,
    limit: int | None = None,
    *,
    catchup: str | None = None,
    window_ms: int | None = None,
    cap: int | None = None,
    overlap: str = "allow",
) -> Verb[Outcome]:
    """Register ``name`` on a cron ``expression`` read in the IANA zone ``tz``.

    The first run is the first cron instant after HOST now (and at or after ``start_at``);
    no run falls after ``end_at``; ``limit`` caps the number of occurrences. ``start_at``
    and ``end_at`` are epoch ms or datetimes (naive ones read in ``tz``). The record stores
    the expression and the zone. ``"registered"``, or ``"exists"`` when a record has that
    name (nothing written: changing a definition is ``upsert``'s job).
    """
    _keys(queue, name)
    d = definition(
        template, None, expression, tz, start_at, end_at, limit, catchup, window_ms, cap, overlap
    )
    return single(_write(queue, name, "register", d, 0), lambda r: _WRITTEN[int(r)])


@verb
def upsert(
    queue: str,
    name: str,
    *,
    template: bytes | str,
    every_ms: int | None = None,
    cron: str | None = None,
    tz: str = "UTC",
    first_in_ms: int = 0,
    start_at: int | datetime | None = None,
    end_at: int | datetime | None = None,
    limit: int | None = None,
    catchup: str | None = None,
    window_ms: int | None = None,
    cap: int | None = None,
    overlap: str = "allow",
) -> Verb[Outcome]:
    """Register ``name``, or update it explicitly: ``"registered"`` | ``"exists"`` | ``"updated"``.

    Exactly one cadence: ``every_ms`` (first run HOST now + ``first_in_ms``) or ``cron`` in
    zone ``tz``. ``"exists"``: the record holds this very definition (nothing written; a
    record that lost its registry member is armed again, so re-registering heals).
    ``"updated"``: the definition changed; it is rewritten in place, the occurrence count
    and last occurrence are kept, and the next run is re-priced from HOST now only when a
    timing field (cadence, zone, start, end) changed. Two callers racing with the same
    definition both get a non-destructive answer; nothing is ever deleted by an upsert.

    Missed runs (``catchup``): ``None`` (the seed's rule) fires one occurrence for a late
    due period, then measures the next from now (interval) or the next cron slot; ``"latest"``
    fires one and stays on the grid; ``"skip"`` fires only if the latest slot is at most
    ``window_ms`` old (default 60 s); ``"all"`` fires every missed slot within ``window_ms``
    (default one day), each its own occurrence, at most ``cap`` (default 100, the newest).
    ``overlap="skip"`` passes a due period while the last occurrence is still pending,
    scheduled (retrying) or active.
    """
    _keys(queue, name)
    guard.span("first_in_ms", first_in_ms)
    if cron is not None and first_in_ms:
        raise ValueError("first_in_ms applies to every_ms registrations; cron runs on its slots")
    d = definition(
        template, every_ms, cron, tz, start_at, end_at, limit, catchup, window_ms, cap, overlap
    )
    step = _write(queue, name, "upsert", d, first_in_ms)
    return single(step, lambda r: _WRITTEN[int(r)])


# -- firing: plan on the host, fire atomically on the server -------------------------------


class Fired(NamedTuple):
    """The outcome of ``fire`` for one name.

    ``outcome`` is ``"fired"`` (``ids`` enqueued, in mint order), ``"skipped"`` (``reason``
    says why: ``raced`` another pump fired this due period or the definition changed since
    the read; ``overlap``; ``limit``; ``missed`` the catch-up policy skipped every slot;
    ``invalid`` the record cannot be planned; ``paused`` the registration is paused) or
    ``"absent"`` (the record is gone; the dangling member was removed).
    """

    name: str
    outcome: Outcome
    reason: str
    ids: tuple[str, ...]


def fire_step(queue: str, entry: dict[str, Any], now: int) -> tuple[Eval, tuple[str, ...]]:
    """The ``fire`` call for a due ``entry`` at HOST ``now``, with the ids it would enqueue.

    An entry with no record (a dangling member) still gets a call, which removes it.
    """
    name = entry["name"]
    keys = (*_keys(queue, name), keyspace.queue_key(queue, "pending"))
    # a dangling member (no record) still gets a call: the script removes it
    p = plan(entry, now) if entry.get("every_ms") or entry.get("cron") else Plan((), None)
    minted = tuple(ids.mint() for _ in p.slots)
    last_at = p.slots[-1] if p.slots else entry["next_at"]
    args = (
        name,
        str(entry["next_at"]),
        keyspace.base(queue),
        "" if p.next_at is None else str(p.next_at),
        str(last_at),
        *minted,
    )
    return Eval("fire", keys, args), minted


def _fired(name: str, minted: tuple[str, ...], reply: Any) -> Fired:
    kind, n = text(reply[0]), int(reply[1])
    if kind == "fired":
        if n:
            return Fired(name, Outcome.FIRED, "", minted[:n])
        return Fired(name, Outcome.SKIPPED, "missed", ())
    if kind == "absent":
        return Fired(name, Outcome.ABSENT, "", ())
    return Fired(name, Outcome.SKIPPED, kind, ())


@verb
def fire(queue: str, entry: dict[str, Any], now: int | None = None) -> Verb[Fired]:
    """Fire one due ``entry`` (as ``due`` returned it) atomically; see ``Fired``.

    HOST clock: ``now`` (default HOST now) prices the next run and mints the ids. The
    script enqueues only if the name's score is still ``entry["next_at"]``, so a second
    caller with the same entry gets ``skipped``/``raced`` and writes nothing.
    """
    at = now_ms() if now is None else guard.instant("now", now)
    step, minted = fire_step(queue, entry, at)
    return single(step, lambda r: _fired(entry["name"], minted, r))


@verb
def sweep(queue: str, now: int | None = None, batch: int | None = None) -> Verb[list[Fired]]:
    """Read the due registrations and fire each one (one pipelined round trip of ``fire``).

    What the Pump runs every tick. HOST clock: ``now`` (default HOST now) selects the due
    names and prices their next runs. ``batch`` bounds one sweep to the most overdue names
    (all of them by default). A record that cannot be planned (say its zone left the zone
    database) is reported ``skipped``/``invalid`` and left as it is.
    """
    keyspace.validate_queue(queue)
    at = now_ms() if now is None else guard.instant("now", now)
    if batch is not None:
        guard.positive("batch", batch)

    def steps() -> Verb[list[Fired]]:
        entries = yield from due_verb(queue, at, batch)
        calls: list[tuple[str, Eval, tuple[str, ...]]] = []
        out: dict[str, Fired] = {}
        for entry in entries:
            if entry.get("paused"):  # the fire script refuses it too (a pause mid-sweep)
                out[entry["name"]] = Fired(entry["name"], Outcome.SKIPPED, "paused", ())
                continue
            try:
                step, minted = fire_step(queue, entry, at)
            except (ValueError, TypeError):
                out[entry["name"]] = Fired(entry["name"], Outcome.SKIPPED, "invalid", ())
                continue
            calls.append((entry["name"], step, minted))
        if calls:
            replies = yield Batch(tuple(step for _, step, _ in calls))
            for (name, _, minted), reply in zip(calls, replies, strict=True):
                if isinstance(reply, errors.ServerError):
                    raise reply
                out[name] = _fired(name, minted, reply)
        return [out[e["name"]] for e in entries]

    return steps()


def next_runs(
    record_or_expression: dict[str, Any] | str,
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
    if entry.get("next_at") is None or entry.get("done"):
        return []
    if entry.get("limit") is not None:
        count = min(count, entry["limit"] - entry.get("fired", 0))
    out: list[int] = []
    at = entry["next_at"]
    while len(out) < count and (entry.get("end_at") is None or at <= entry["end_at"]):
        out.append(at)
        at = next_slot(entry, at) if entry.get("cron") else at + entry["every_ms"]
    return [datetime.fromtimestamp(ms / 1000, zi) for ms in out]


@verb
def occurrences(queue: str, names: Sequence[str]) -> Verb[dict[str, int]]:
    """How many occurrences each named registration has enqueued (its ``fired`` field)."""
    keys = [_keys(queue, n)[1] for n in names]

    def steps() -> Verb[dict[str, int]]:
        replies = yield Batch(tuple(Command(("HGET", k, "fired")) for k in keys))
        return {n: int(r or 0) for n, r in zip(names, replies, strict=True)}

    return steps()
