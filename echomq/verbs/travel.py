"""Time travel for tests: move a queue's stored instants earlier (the ``travel`` script).

What ``echomq.testing.advance`` and ``testing.drain(with_scheduled=True)`` run, and nothing
else: no production transition goes through here, so the hot path pays nothing for it.
The SERVER clock keeps real time; the instants move (run-ats, registrations' next runs,
deadlines, pause ends, rate blocks), each queue's in one atomic call, active leases never.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, single, verb


class Shifted(NamedTuple):
    """What one ``shift`` moved: by how many ms, and how many instants of each kind."""

    ms: int
    scheduled: int
    registrations: int
    deadlines: int
    holds: int  # pause ends and rate blocks (the queue's, its groups')


def _shifted(reply: Any) -> Shifted:
    return Shifted(*(int(v) for v in reply))


def _eval(queue: str, how: str) -> Eval:
    return Eval("travel",
                (keyspace.queue_key(queue, "schedule"), keyspace.queue_key(queue, "repeat")),
                (keyspace.base(queue), how))


@verb
def shift(queue: str, delta_ms: int) -> Verb[Shifted]:
    """Move every stored instant of ``queue`` ``delta_ms`` earlier (what is due within
    ``delta_ms`` of now becomes due now, in its order); active leases stay. SERVER and
    HOST instants alike move by the span: no clock is read."""
    guard.positive("delta_ms", delta_ms)
    return single(_eval(queue, str(delta_ms)), _shifted)


@verb
def schedule_due(queue: str) -> Verb[Shifted]:
    """Make everything on ``queue``'s schedule due now, in run-at order (its run-ats move by
    as much as the last is ahead of SERVER now); nothing else moves."""
    return single(_eval(queue, "due"), _shifted)
