"""``advance``: time travel for tests, without touching any clock.

Freezing or patching the host clock cannot move the server's ``TIME`` (and hangs asyncio
code: freezegun's ``monotonic``), so the kit moves the stored instants instead: each
queue's run-ats, registrations' next runs, deadlines, pause ends and rate blocks move
``delta`` earlier in one atomic call per queue (the ``travel`` script, ``verbs.travel``),
so what is due within ``delta`` of now is due now, in its order, and the rest is ``delta``
nearer. Active leases never move (the reaper would take running jobs). The production
scripts are untouched: no transition reads anything ``advance`` adds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING

from echomq.core import guards as guard
from echomq.core.times import to_ms
from echomq.verbs import registry, repeat, travel

if TYPE_CHECKING:
    from echomq.tasks.app import App


def advance(app: App, delta: int | dt.timedelta, *, queues: Iterable[str] | None = None
            ) -> dict[str, travel.Shifted]:
    """Move every stored instant of the app's queues ``delta`` (ms or ``timedelta``)
    earlier: jobs, recurrence occurrences, deadlines and pause ends due within ``delta`` of
    now become due now, in order. The app's recurrences are registered first (as a worker
    does at start), so their next runs move too. Run the jobs with ``testing.drain``
    (``with_recurrences=True`` fires the occurrences). What moved, per queue.

    The queues: ``queues`` (a partitioned queue by its logical name), else every queue of
    the app's tasks and recurrences, its default queue, and every queue the server's
    registry knows (each admission registers its queue)."""
    ms = guard.positive("delta", to_ms(delta))
    if isinstance(queues, str):
        raise TypeError("queues is a list of queue names, not one str")
    conn = app.connector()
    if queues is None:
        names = [*app.queues(), *(r.queue for r in app.recurrences), app.default_queue,
                 *registry.names(conn)]
    else:
        names = app.expand(queues)
    for r in app.recurrences:
        if r.queue in names:
            repeat.put(conn, r.queue, r.name, r.spec)
    return {q: travel.shift(conn, q, ms) for q in dict.fromkeys(names)}
