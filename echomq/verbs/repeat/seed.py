"""The registry's base verbs: register, cancel, due, advance, count, and pause/resume:
at least once per due period (``due`` then ``advance``). HOST clock (``now_ms``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.outcomes import Outcome
from echomq.core.steps import Batch, Command, Eval, Verb, scored, single, verb
from echomq.core.times import to_epoch_ms
from echomq.verbs.repeat.definitions import first_run
from echomq.verbs.repeat.entries import (
    Registration,
    entries_of,
    entry_keys,
    entry_of,
    now_ms,
    scored_names,
)


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
    keys = entry_keys(queue, name)
    guard.span("every_ms", every_ms, minimum=1)
    guard.payload(template, "template")
    guard.span("first_in_ms", first_in_ms)
    first_at = now_ms() + first_in_ms
    step = Eval("register", keys, (name, str(every_ms), template, str(first_at)))
    return single(step, lambda r: Outcome.REGISTERED if int(r) == 1 else Outcome.EXISTS)


@verb
def cancel(queue: str, name: str) -> Verb[int]:
    """Remove the registration (record and member); 1 if a record was removed, else 0."""
    zset, record = entry_keys(queue, name)

    def steps() -> Verb[int]:
        replies = yield Batch((Command(("ZREM", zset, name)), Command(("DEL", record))))
        return int(replies[1])

    return steps()


@verb
def pause(queue: str, name: str, until: int | dt.datetime | None = None) -> Verb[Outcome]:
    """Pause ``name``: ``"paused"``, or ``"absent"`` when no record has that name.

    The record and its next-run score stay as they are; ``fire`` (so the Pump's ``sweep``)
    refuses a paused name, so no occurrence is minted until ``resume``. Pausing a paused
    registration is a no-op (it sets or drops the end). ``until`` (epoch ms or a
    ``datetime``, SERVER clock): the pause ends by itself at that instant: the registry
    score moves to it, so a Pump wakes then, and its sweep resumes the registration as
    ``resume`` would (an interval fires at once, a cron at its first slot from the end).
    """
    keys = entry_keys(queue, name)
    end = "" if until is None else str(guard.instant("until", to_epoch_ms(until)))
    step = Eval("repeat_hold", keys, (name, "pause", end))
    return single(step, lambda r: Outcome.PAUSED if int(r) == 1 else Outcome.ABSENT)


def rearm(entry: Mapping[str, Any], now: int, since: int | None = None) -> int | None:
    """Where a resumed registration runs next (HOST ms): as a fresh registration from
    ``now`` (an interval at once, a cron at its next slot, never before ``start_at``;
    ``None`` once ``end_at`` is past). ``since``: a pause's end, from which a cron's first
    slot is taken instead (a slot at or after the end still fires). Pure."""
    if not (entry.get("cron") or entry.get("every_ms")):
        return None
    after = min(now, since - 1) if since is not None and entry.get("cron") else now
    start, end = entry.get("start_at"), entry.get("end_at")
    return first_run(entry.get("cron") or None, entry.get("tz") or "UTC",
                     int(start) if start else None, int(end) if end else None, after)


@verb
def resume(queue: str, name: str) -> Verb[Outcome]:
    """Resume a paused ``name``: ``"resumed"``, or ``"absent"`` when no record has that name.

    HOST clock: the next run is re-armed from HOST now per the definition, as a fresh
    registration would be (an interval is due at once, a cron at its next slot after now,
    never before ``start_at``; parked ``ended`` when ``end_at`` is past), so the runs
    missed while paused are not caught up. A finished registration stays finished;
    resuming one that is not paused changes nothing.
    """
    keys = entry_keys(queue, name)

    def steps() -> Verb[Outcome]:
        fields = yield Command(("HGETALL", keys[1]))
        if not fields:
            return Outcome.ABSENT
        at = rearm(entry_of(name, "inf", fields), now_ms())
        reply = yield Eval("repeat_hold", keys, (name, "resume", "" if at is None else str(at)))
        return Outcome.RESUMED if int(reply) == 1 else Outcome.ABSENT

    return steps()


@verb
def due(queue: str, now: int | None = None) -> Verb[list[Registration]]:
    """Registrations scored at or before HOST now, each with its record.

    Host commands, not a script: ``ZRANGEBYSCORE`` then one pipelined ``HGETALL`` each.
    Each entry is a ``Registration``, read as ``{"name", "next_at", "every_ms",
    "template", ...record fields}`` (the template as bytes, the numeric fields as int, the
    others as str) or through its typed properties. A member whose record is gone is still
    listed (with no ``every_ms``) so a sweep can drop it.
    """
    keyspace.validate_queue(queue)
    at = now_ms() if now is None else guard.instant("now", now)
    return due_verb(queue, at)


def due_verb(queue: str, at: int, limit: int | None = None) -> Verb[list[Registration]]:
    """The steps of ``due`` at HOST ms ``at``, the ``limit`` most overdue when given (a
    generator other verbs ``yield from``)."""
    zset = keyspace.queue_key(queue, "repeat")
    read: tuple[str | int, ...] = ("ZRANGEBYSCORE", zset, "-inf", at, "WITHSCORES")
    if limit is not None:
        read += ("LIMIT", 0, limit)
    members = yield Command(read)
    return (yield from entries_of(queue, scored_names(members)))


@verb
def advance(queue: str, name: str, every_ms: int) -> Verb[Outcome]:
    """Set ``name``'s next run to HOST now + ``every_ms``: ``"advanced"``, or ``"absent"``
    (the record was cancelled mid-sweep; the dangling member is removed)."""
    keys = entry_keys(queue, name)
    guard.span("every_ms", every_ms, minimum=1)
    step = Eval("advance", keys, (name, str(now_ms() + every_ms)))
    return single(step, lambda r: Outcome.ADVANCED if int(r) == 1 else Outcome.ABSENT)


@verb
def head(queue: str) -> Verb[int | None]:
    """The registry's earliest next run (HOST ms, or the server's under the server clock),
    ``None`` when no registration has one: where a Pump plans its next wake."""
    zset = keyspace.queue_key(queue, "repeat")

    def decode(reply: Any) -> int | None:
        got = scored(reply)
        if not got:
            return None
        score = float(got[0][1])
        return int(score) if score != float("inf") else None

    return single(Command(("ZRANGE", zset, 0, 0, "WITHSCORES")), decode)


@verb
def count(queue: str) -> Verb[int]:
    """The registry depth: how many names are registered."""
    step = Command(("ZCARD", keyspace.queue_key(queue, "repeat")))
    return single(step, int)
