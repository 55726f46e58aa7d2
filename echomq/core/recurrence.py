"""The recurrence planner: which slots a due registration fires, and its next run (pure).

Beside ``backoff`` and ``cron``: no I/O and no clock of its own. Every instant is HOST-clock
epoch ms, passed in by the caller (``repeat.fire``/``sweep`` read the host's wall clock).
An ``entry`` is a registry entry as ``repeat.due``/``records``/``get`` return it: its
``next_at`` and either ``every_ms`` or ``cron`` (+ ``tz``), with the optional ``catchup``,
``window_ms``, ``cap``, ``end_at``, ``exclude`` (slots that do not fire) and ``jitter_ms``
(each occurrence's run-at moved by a deterministic amount).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from echomq.core import cron as cronlib

DEFAULT_SKIP_WINDOW_MS = 60_000
DEFAULT_ALL_WINDOW_MS = 86_400_000
DEFAULT_CAP = 100


class Plan(NamedTuple):
    """What one firing of a due entry does: the slots it fires (HOST ms, oldest first, one
    occurrence each) and the next run after them (``None``: no further run)."""

    slots: tuple[int, ...]
    next_at: int | None


def next_slot(entry: Mapping[str, Any], after: int) -> int:
    """The registration's first slot strictly after ``after`` (HOST ms)."""
    if entry.get("cron"):
        return cronlib.next_ms(entry["cron"], after, entry.get("tz") or "UTC")
    every, anchor = entry["every_ms"], entry["next_at"]
    if after < anchor:
        return int(anchor)
    return int(anchor + ((after - anchor) // every + 1) * every)


def _latest_slot(entry: Mapping[str, Any], lo: int, now: int) -> int | None:
    """The newest slot in ``[lo, now]`` for an interval, the oldest for a cron (either
    stands for "a slot inside the window"); ``None`` when the window holds none."""
    if entry.get("cron"):
        slot = next_slot(entry, lo - 1)
    else:
        anchor, every = entry["next_at"], entry["every_ms"]
        slot = anchor + ((now - anchor) // every) * every
    return slot if lo <= slot <= now else None


def _window_slots(entry: Mapping[str, Any], lo: int, now: int, cap: int) -> list[int]:
    """Every slot in ``[lo, now]``, the newest ``cap`` of them, oldest first."""
    if entry.get("cron"):
        out: list[int] = []
        slot = next_slot(entry, lo - 1)
        while slot <= now:
            out.append(slot)
            slot = next_slot(entry, slot)
        return out[-cap:]
    anchor, every = entry["next_at"], entry["every_ms"]
    first_k = max(0, -((anchor - lo) // every))  # ceil((lo - anchor) / every)
    last_k = (now - anchor) // every
    first_k = max(first_k, last_k - cap + 1)
    return [anchor + k * every for k in range(first_k, last_k + 1)]


def jitter_offset(name: str, slot: int, jitter_ms: int) -> int:
    """The deterministic run-at offset of registration ``name``'s occurrence for ``slot``,
    in ``[0, jitter_ms)``: a hash of the two, so every Pump computes the same offset (and
    ``echomq repeat next`` can show it) while occurrences still spread over the window."""
    if jitter_ms <= 1:
        return 0
    digest = hashlib.blake2b(f"{name}\x00{slot}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % jitter_ms


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_exclude(items: Iterable[Any]) -> list[str]:
    """``exclude=``: dates (``datetime.date``, or ``"YYYY-MM-DD"``) and/or cron expressions
    whose matching slots do not fire, as the canonical strings the record stores (a date as
    ISO, a cron expression normalized). ``ValueError``/``TypeError`` before any I/O."""
    if isinstance(items, (str, bytes, dt.date)):
        items = [items]
    out: list[str] = []
    for item in items:
        if isinstance(item, dt.datetime):
            raise TypeError(f"exclude takes dates or cron expressions, not a datetime ({item})")
        if isinstance(item, dt.date):
            out.append(item.isoformat())
        elif isinstance(item, str) and _DATE.match(item.strip()):
            out.append(dt.date.fromisoformat(item.strip()).isoformat())
        elif isinstance(item, str):
            try:
                out.append(cronlib.validate(item))
            except cronlib.CronError as exc:
                raise ValueError(f"exclude {item!r}: not a date (YYYY-MM-DD) nor a cron "
                                 f"expression: {exc}") from None
        else:
            raise TypeError(f"exclude takes dates or cron expressions, not "
                            f"{type(item).__name__}")
    return list(dict.fromkeys(out))


def exclusions(entry: Mapping[str, Any]) -> list[str]:
    """The ``exclude`` list a record stores (a JSON list), or ``[]``."""
    raw = entry.get("exclude")
    if not raw:
        return []
    if isinstance(raw, list):
        return [str(x) for x in raw]
    try:
        got = json.loads(raw)
    except ValueError:
        return []
    return [str(x) for x in got] if isinstance(got, list) else []


def excluded(entry: Mapping[str, Any], slot: int) -> bool:
    """Whether ``slot`` (epoch ms) matches one of the entry's exclusions, read in its zone:
    a date matches every slot on that calendar day, a cron expression every slot in a
    minute it names."""
    rules = exclusions(entry)
    if not rules:
        return False
    tz = entry.get("tz") or "UTC"
    day = dt.datetime.fromtimestamp(slot / 1000, dt.UTC).astimezone(cronlib.zone(tz)).date()
    for rule in rules:
        if _DATE.match(rule):
            if day.isoformat() == rule:
                return True
        elif cronlib.parse(rule).matches(slot, tz):
            return True
    return False


def plan(entry: Mapping[str, Any], now: int) -> Plan:
    """Which slots a due ``entry`` fires at HOST ``now`` and where it goes next (pure).
    A slot its exclusions match is passed over (no occurrence; the registration moves on
    as if it had fired)."""
    due_at = entry["next_at"]
    policy = entry.get("catchup") or ""
    if not entry.get("cron") and not entry.get("every_ms"):
        raise ValueError(f"registration {entry.get('name')!r} has neither every_ms nor cron")
    if policy == "":
        slots = [due_at]
        nxt = next_slot(entry, now) if entry.get("cron") else now + entry["every_ms"]
    elif policy == "latest":
        latest = _latest_slot(entry, due_at, now)
        slots = [due_at if latest is None else latest]
        nxt = next_slot(entry, now)
    elif policy == "skip":
        window = entry.get("window_ms") or DEFAULT_SKIP_WINDOW_MS
        latest = _latest_slot(entry, max(due_at, now - window), now)
        slots = [] if latest is None else [latest]
        nxt = next_slot(entry, now)
    else:
        window = entry.get("window_ms") or DEFAULT_ALL_WINDOW_MS
        cap = entry.get("cap") or DEFAULT_CAP
        slots = _window_slots(entry, max(due_at, now - window), now, cap)
        nxt = next_slot(entry, now)
    end = entry.get("end_at")
    if entry.get("exclude"):
        slots = [s for s in slots if not excluded(entry, s)]
    if end is not None:
        slots = [s for s in slots if s <= end]
        if nxt > end:
            return Plan(tuple(slots), None)
    return Plan(tuple(slots), nxt)


def slots_between(entry: Mapping[str, Any], start: int, end: int, limit: int) -> list[int]:
    """The registration's slots in ``[start, end)`` (epoch ms), oldest first, at most
    ``limit`` (``ValueError`` past it), its exclusions and ``start_at``/``end_at`` left
    out: what a backfill of that range fires. An interval's slots are its grid through
    its current ``next_at``."""
    def after(at: int) -> int:
        if entry.get("cron"):
            return next_slot(entry, at)
        # the interval's grid through next_at, both ways (next_slot only looks ahead of it)
        anchor, every = int(entry["next_at"]), int(entry["every_ms"])
        return anchor + ((at - anchor) // every + 1) * every

    out: list[int] = []
    slot = after(start - 1)
    lo, hi = entry.get("start_at"), entry.get("end_at")
    while slot < end:
        if (lo is None or slot >= lo) and (hi is None or slot <= hi) and not excluded(entry, slot):
            out.append(slot)
            if len(out) > limit:
                raise ValueError(f"the range holds more than {limit} slots: backfill a "
                                 f"shorter one")
        slot = after(slot)
    return out
