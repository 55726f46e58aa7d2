"""The recurrence planner: which slots a due registration fires, and its next run (pure).

Beside ``backoff`` and ``cron``: no I/O and no clock of its own. Every instant is HOST-clock
epoch ms, passed in by the caller (``repeat.fire``/``sweep`` read the host's wall clock).
An ``entry`` is a registry entry as ``repeat.due``/``records``/``get`` return it: its
``next_at`` and either ``every_ms`` or ``cron`` (+ ``tz``), with the optional ``catchup``,
``window_ms``, ``cap`` and ``end_at``.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def plan(entry: Mapping[str, Any], now: int) -> Plan:
    """Which slots a due ``entry`` fires at HOST ``now`` and where it goes next (pure)."""
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
    if end is not None:
        slots = [s for s in slots if s <= end]
        if nxt > end:
            return Plan(tuple(slots), None)
    return Plan(tuple(slots), nxt)
