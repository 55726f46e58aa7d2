"""The recurrence registry: a registration, not a loop. Every score is HOST-clock ms.

``register``, ``due`` and ``advance`` read the host's wall clock (``time.time()``), where
the schedule set and promote read the server's ``TIME``. A late tick does not pile up a
backlog: ``advance`` measures the next run from the host's now, not from the old score.
"""

from __future__ import annotations

import time
from typing import Any

from . import _guards as guard
from . import keyspace
from .outcomes import Outcome
from .steps import Batch, Command, Eval, Maybe, drive, single, text


def now_ms() -> int:
    """The one clock every repeat score is priced on: the host's wall clock, in ms."""
    return time.time_ns() // 1_000_000


def _keys(queue: str, name: str) -> tuple[str, str]:
    guard.string("name", name)
    if not name:
        raise ValueError("a registration name must not be empty")
    return keyspace.queue_key(queue, "repeat"), keyspace.repeat_key(queue, name)


def register(
    conn: Any,
    queue: str,
    name: str,
    every_ms: int,
    template: bytes | str,
    first_in_ms: int = 0,
) -> Maybe[Outcome]:
    """Register ``name`` every ``every_ms``; first run at HOST now + ``first_in_ms``.

    ``"registered"``, or ``"exists"`` when a live record has that name (nothing written).
    """
    keys = _keys(queue, name)
    guard.positive("every_ms", every_ms)
    guard.payload(template, "template")
    guard.non_negative("first_in_ms", first_in_ms)
    first_at = now_ms() + first_in_ms
    step = Eval("register", keys, (name, str(every_ms), template, str(first_at)))
    return drive(
        conn, single(step, lambda r: Outcome.REGISTERED if int(r) == 1 else Outcome.EXISTS)
    )


def cancel(conn: Any, queue: str, name: str) -> Maybe[int]:
    """Remove the registration (record and member); 1 if a record was removed, else 0."""
    zset, record = _keys(queue, name)

    def verb() -> Any:
        replies = yield Batch((Command(("ZREM", zset, name)), Command(("DEL", record))))
        return int(replies[1])

    return drive(conn, verb())


def due(conn: Any, queue: str, now: int | None = None) -> Maybe[list[dict[str, Any]]]:
    """Registrations scored at or before HOST now, each with its record.

    Host commands, not a script: ``ZRANGEBYSCORE`` then one pipelined ``HGETALL`` each.
    Each entry: ``{"name", "next_at", "every_ms", "template", ...record fields}``. A member
    whose record is gone is still listed (with no ``every_ms``) so a sweep can drop it.
    """
    zset = keyspace.queue_key(queue, "repeat")
    at = now_ms() if now is None else guard.integer("now", now)

    def verb() -> Any:
        members = yield Command(("ZRANGEBYSCORE", zset, "-inf", at, "WITHSCORES"))
        if not members:
            return []
        names = [text(m) for m, _ in members]
        records = yield Batch(
            tuple(Command(("HGETALL", keyspace.repeat_key(queue, n))) for n in names)
        )
        out = []
        for (member, score), name, record in zip(members, names, records, strict=True):
            entry: dict[str, Any] = {"name": name, "next_at": int(score)}
            for k, v in (record or {}).items():
                key = text(k)
                entry[key] = v if key == "template" else text(v)
            if "every_ms" in entry:
                entry["every_ms"] = int(entry["every_ms"])
            out.append(entry)
        return out

    return drive(conn, verb())


def advance(conn: Any, queue: str, name: str, every_ms: int) -> Maybe[Outcome]:
    """Set ``name``'s next run to HOST now + ``every_ms``: ``"advanced"``, or ``"absent"``
    (the record was cancelled mid-sweep; the dangling member is removed)."""
    keys = _keys(queue, name)
    guard.positive("every_ms", every_ms)
    step = Eval("advance", keys, (name, str(now_ms() + every_ms)))
    return drive(conn, single(step, lambda r: Outcome.ADVANCED if int(r) == 1 else Outcome.ABSENT))


def count(conn: Any, queue: str) -> Maybe[int]:
    """The registry depth: how many names are registered."""
    step = Command(("ZCARD", keyspace.queue_key(queue, "repeat")))
    return drive(conn, single(step, int))
