"""Steering a registration by hand: ``trigger`` (one occurrence now, the schedule kept) and
``backfill`` (the slots of a past range, each fired at most once).

Both run one script each. A backfill plans its slots on the host (``recurrence.
slots_between``: the registration's cadence, its exclusions, ``start_at``/``end_at``) and
the script skips every slot already fired (the record remembers the slots fired, by the
Pump or an earlier backfill, on ``emq:{q}:repeat:<name>:slots``), so backfilling the same
range twice fires nothing new."""

from __future__ import annotations

import datetime as dt
from typing import Any

from echomq.core import guards as guard
from echomq.core import ids, keyspace
from echomq.core.recurrence import slots_between
from echomq.core.steps import Eval, Verb, text, verb
from echomq.core.times import to_epoch_ms
from echomq.verbs.repeat.entries import entry_keys, get

#: the most slots one backfill fires (a longer range is refused before any write)
MAX_BACKFILL = 1_000


@verb
def trigger(queue: str, name: str) -> Verb[str]:
    """Run one occurrence of ``name`` now (claimable at once, whatever its overlap policy):
    its job id. The schedule is kept (next run, occurrence count and limit untouched).
    ``LookupError`` when no registration has that name (nothing written)."""
    keys = entry_keys(queue, name)
    job_id = ids.mint()

    def steps() -> Verb[str]:
        done = yield Eval("trigger", keys, (name, keyspace.base(queue), job_id))
        if not int(done):
            raise LookupError(f"no registration {name!r} on {queue!r}")
        return job_id

    return steps()


@verb
def backfill(queue: str, name: str, start: int | dt.datetime, end: int | dt.datetime
             ) -> Verb[list[str]]:
    """Fire ``name``'s slots in ``[start, end)`` (epoch ms or datetimes, the registry's
    clock) that were not fired before: the ids enqueued, in slot order (claimable now,
    each under the overlap policy). Excluded slots and slots outside ``start_at``/
    ``end_at`` are left out; at most ``MAX_BACKFILL`` slots per call (``ValueError`` for a
    longer range, nothing written). ``LookupError`` when no registration has that name."""
    keys = entry_keys(queue, name)
    lo = guard.instant("start", to_epoch_ms(start))
    hi = guard.instant("end", to_epoch_ms(end))
    if hi <= lo:
        raise ValueError("end must be after start")

    def steps() -> Verb[list[str]]:
        entry = yield from get.steps(queue, name)
        if entry is None:
            raise LookupError(f"no registration {name!r} on {queue!r}")
        anchor = entry.next_at or entry.last_at or entry.start_at or lo
        slots = slots_between({**entry, "next_at": anchor}, lo, hi, MAX_BACKFILL)
        if not slots:
            return []
        minted = [ids.mint() for _ in slots]
        args: list[Any] = [name, keyspace.base(queue)]
        for job_id, slot in zip(minted, slots, strict=True):
            args += [job_id, "", str(slot)]
        reply = yield Eval("backfill", keys, tuple(args))
        return [text(r) for r in reply]

    return steps()
