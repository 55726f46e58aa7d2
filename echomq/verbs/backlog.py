"""What a queue has ready to run now: the read a burst worker (``echomq worker --burst``)
polls to know when it has drained what was due, and how long its oldest due job has
waited (``lag``: what ``echomq health --max-lag`` bounds).

Ready = waiting on ``pending`` plus due on ``schedule`` (run-at <= SERVER now: the promote
leg will release them within a beat). Jobs in a group's lane are not counted: a lane the
consumer can serve shows up as claims, and one it cannot (a paused group, a full limit) is
not ready. Clock: the SERVER clock (``TIME``), the one the schedule is priced on.
"""

from __future__ import annotations

import contextlib

from echomq.core import ids, keyspace
from echomq.core.steps import Batch, Command, Verb, scored, text, verb


@verb
def ready(queue: str) -> Verb[int]:
    """How many jobs of ``queue`` are pending or due now (two round trips); 0 while the
    queue is paused: no claim hands them out, so a burst worker has nothing it may run."""
    pending = keyspace.queue_key(queue, "pending")
    schedule = keyspace.queue_key(queue, "schedule")
    paused = keyspace.queue_key(queue, "paused")

    def calls() -> Verb[int]:
        secs, micros = yield Command(("TIME",))
        now_ms = int(secs) * 1000 + int(micros) // 1000
        waiting, due, held = yield Batch((Command(("ZCARD", pending)),
                                          Command(("ZCOUNT", schedule, "-inf", now_ms)),
                                          Command(("EXISTS", paused))))
        return 0 if int(held) else int(waiting) + int(due)

    return calls()


@verb
def lag(queue: str) -> Verb[int | None]:
    """How long (ms, SERVER clock) the oldest due job of ``queue`` has waited to start, or
    ``None`` when nothing is due. Two candidates, one round trip after ``TIME``: the head
    of the schedule when its run-at has passed (due, not yet promoted: since its run-at),
    and the head of pending, the next job a claim takes (since its admission, read from
    its id's timestamp, the producer's HOST clock; a job promoted from the schedule counts
    from its admission too, so a long-delayed job reads old until it is claimed, which a
    serving worker does within a beat). Jobs in a group's lane are left out: a paused or
    full group waits by design."""
    pending = keyspace.queue_key(queue, "pending")
    schedule = keyspace.queue_key(queue, "schedule")

    def calls() -> Verb[int | None]:
        secs, micros = yield Command(("TIME",))
        now_ms = int(secs) * 1000 + int(micros) // 1000
        head, due = yield Batch((Command(("ZRANGE", pending, 0, 0)),
                                 Command(("ZRANGE", schedule, 0, 0, "WITHSCORES"))))
        waits: list[int] = []
        for member in head or ():
            with contextlib.suppress(ValueError):
                waits.append(now_ms - ids.timestamp_ms(text(member)))
        for _member, score in scored(due):
            if float(score) <= now_ms:
                waits.append(now_ms - int(float(score)))
        return max(0, max(waits)) if waits else None

    return calls()
