"""Purge: delete every job of a queue in one state (``echomq purge``, rq's ``empty``,
``celery purge``).

Each job goes by the ``discard`` script, atomically: its row, its entry on the state's set
(or its group's lane), its kept result and the unique key it owns, so no ghost id stays on
a set and no unique key keeps refusing admissions. The purge as a whole is not one
transition: it reads a batch of ids, discards them in one pipelined round trip, and goes
on until the set is empty. A job claimed in between is not deleted (``discard`` refuses a
running job: cancel it instead) and an id whose row is already gone only leaves its set.
No clock.
"""

from __future__ import annotations

from echomq.core import errors, keyspace
from echomq.core.steps import Batch, Command, Eval, Verb, text, verb

#: the states a purge empties, and the set each lives on
STATES = {"dead": "dead", "pending": "pending", "scheduled": "schedule", "waiting": "waiting"}
BATCH = 500


def _discard(queue: str, job_id: str) -> Eval:
    return Eval("discard",
                (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, f"result:{job_id}")),
                (keyspace.base(queue), job_id))


@verb
def purge(queue: str, state: str, batch: int = BATCH) -> Verb[int]:
    """Delete every job of ``queue`` in ``state`` (``dead``, ``pending``: flat and in the
    groups' lanes, ``scheduled``, or ``waiting``: parked on a durable signal); how many
    were deleted."""
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, not {batch!r}")
    main = keyspace.queue_key(queue, STATES[state])

    def one_set(key: str) -> Verb[int]:
        deleted = 0
        while True:
            found = [text(m) for m in (yield Command(("ZRANGE", key, 0, batch - 1)))]
            if not found:
                return deleted
            replies = yield Batch(tuple(_discard(queue, i) for i in found))
            gone: list[str] = []  # ids whose row was already gone: off the set only
            moved = 0
            for job_id, reply in zip(found, replies, strict=True):
                if isinstance(reply, errors.StateError):
                    continue  # claimed meanwhile (running): not this purge's to delete
                if isinstance(reply, errors.ServerError):
                    raise reply
                if int(reply):
                    deleted += 1
                    moved += 1
                else:
                    gone.append(job_id)
            if gone:
                moved += int((yield Command(("ZREM", key, *gone))))
            if not moved:
                return deleted  # only running jobs left at the head: nothing more to do

    def calls() -> Verb[int]:
        total = yield from one_set(main)
        if state == "pending":
            groups = yield Command(("SMEMBERS", keyspace.queue_key(queue, "groups")))
            for g in sorted(text(x) for x in groups or ()):
                total += yield from one_set(keyspace.lane_key(queue, g))
        return total

    return calls()
