"""What a queue has ready to run now: the read a burst worker (``echomq worker --burst``)
polls to know when it has drained what was due.

Ready = waiting on ``pending`` plus due on ``schedule`` (run-at <= SERVER now: the promote
leg will release them within a beat). Jobs in a group's lane are not counted: a lane the
consumer can serve shows up as claims, and one it cannot (a paused group, a full limit) is
not ready. Clock: the SERVER clock (``TIME``), the one the schedule is priced on.
"""

from __future__ import annotations

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, verb


@verb
def ready(queue: str) -> Verb[int]:
    """How many jobs of ``queue`` are pending or due now (two round trips)."""
    pending = keyspace.queue_key(queue, "pending")
    schedule = keyspace.queue_key(queue, "schedule")

    def calls() -> Verb[int]:
        secs, micros = yield Command(("TIME",))
        now_ms = int(secs) * 1000 + int(micros) // 1000
        waiting, due = yield Batch((Command(("ZCARD", pending)),
                                    Command(("ZCOUNT", schedule, "-inf", now_ms))))
        return int(waiting) + int(due)

    return calls()
