"""The queue rates an app's tasks declare (``@app.task(rate="10/s")``), applied on the server
when a worker starts.

A queue has one rate: at most MAX claims start in any window of DURATION, counted by the
claim script on the SERVER clock, for every worker serving the queue. A worker applies the
rate its app declares for each queue it serves and that a task of the app lives on
(``jobs.declare_rate``: one atomic transition per queue, at start only). How it combines
with ``echomq rate QUEUE MAX/DURATION`` (an operator's setting, ``jobs.set_rate``):

- the operator's rate wins: a worker start never overwrites a rate an operator set after a
  worker last applied the declared one (it logs that it kept it);
- ``echomq rate QUEUE none`` removes the operator's rate; the next worker start applies the
  declared one again;
- a task that stops declaring a rate: the next worker start removes the rate a worker had
  applied (never an operator's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from echomq.core import rates
from echomq.verbs import jobs

if TYPE_CHECKING:
    from echomq.tasks.app import App

log = logging.getLogger("echomq.worker")


def declared(app: App, queue: str) -> tuple[tuple[int, int] | None, str | None] | None:
    """``(rate, task name)`` the app declares for ``queue`` (a partition counts as its
    queue); ``(None, None)`` when its tasks there declare none; ``None`` when no task of
    the app lives on ``queue`` (the worker leaves its rate alone)."""
    mine = app.registry.on(queue)
    if not mine:
        return None
    for t in mine:
        if t.rate is not None:
            return t.rate, t.name
    return None, None


async def apply(conn: Any, app: App, queues: Sequence[str]) -> None:
    """Apply the declared rate of each of ``queues`` (see the module doc), logging what
    changed and what an operator's setting kept: the queues at once, so their calls share
    round trips."""
    await asyncio.gather(*(_apply(conn, app, q) for q in queues))


async def _apply(conn: Any, app: App, q: str) -> None:
    found = declared(app, q)
    if found is not None:
        rate, task = found
        outcome, in_force = await jobs.declare_rate(conn, q, rate)
        shown = rates.show(_pair(in_force)) if in_force else "none"
        if outcome == "applied":
            log.info("queue %s: rate %s (declared by task %s)", q, shown, task)
        elif outcome == "cleared":
            log.info("queue %s: rate removed (no task declares one any more)", q)
        elif outcome == "kept" and (rate is None or _pair(in_force) != rate):
            want = rates.show(rate) if rate is not None else "none"
            log.warning("queue %s: keeping the rate %s set with `echomq rate` (the app "
                        "declares %s; `echomq rate %s none` gives the declared rate back "
                        "at the next worker start)", q, shown, want, q)


def _pair(text: str) -> tuple[int, int] | None:
    count, _, per = text.partition("/")
    return (int(count), int(per)) if count and per else None
