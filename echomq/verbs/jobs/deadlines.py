"""Deadlines: the sweep that ends waiting jobs past theirs (``expire``).

A job admitted with ``expires_ms``/``expires_at_ms`` (``jobs.admit``; ``task.options(expires=)``
in the friendly layer) carries its deadline on its row and on ``emq:{q}:deadlines``. The
claim that pops it and the promote script that releases it check the deadline in the same
script; ``expire`` ends the waiting jobs nothing pops (a paused queue, a group at its
limit, a run-at past the deadline). The beat runs it when ``jobs.next_due`` reports a
deadline due. SERVER clock throughout.
"""

from __future__ import annotations

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, single, verb


@verb
def expire(queue: str, batch: int) -> Verb[int]:
    """End up to ``batch`` waiting jobs (pending, a lane, scheduled) whose deadline is at
    or before SERVER now: each leaves its set and ends ``expired`` in one transition; the
    count ended. Entries of jobs that started or ended meanwhile are only dropped."""
    guard.positive("batch", batch)
    step = Eval(
        "expire",
        (keyspace.queue_key(queue, "deadlines"), keyspace.queue_key(queue, "expired")),
        (keyspace.base(queue), str(batch)),
    )
    return single(step, int)
