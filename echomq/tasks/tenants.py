"""The tenant controls an app's tasks declare (``@app.task(group_limit=, group_rate=,
queue_limit=)``), applied on the server when a worker starts, next to the declared rates
(``echomq.tasks.ratecaps``).

- ``group_limit``/``group_rate``: the queue's group defaults (``groups.set_defaults``),
  which every group without its own setting takes; an operator's ``echomq group limit/rate``
  on one group still wins for that group. A worker writes them when a task of its app on
  the queue declares one (two tasks declaring different ones: the first registered wins).
- ``queue_limit``: the queue-wide cap (``jobs.declare_limit``): an operator's ``echomq
  limit`` is kept, as an operator's rate is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from echomq.verbs import groups, jobs

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.defaults import Tenants

log = logging.getLogger("echomq.worker")


def declared(app: App, queue: str) -> list[Tenants] | None:
    """The tenant controls of the app's tasks on ``queue`` (a partition counts as its
    queue); ``None`` when no task of the app lives there (the worker leaves it alone)."""
    mine = app.registry.on(queue)
    if not mine:
        return None
    return [t.defaults.tenants for t in mine if t.defaults.tenants is not None]


async def apply(conn: Any, app: App, queues: Sequence[str]) -> None:
    """Apply each queue's declared group defaults and cap (see the module doc): the
    queues at once, so their calls share round trips (a worker on 1,000 queues starts in
    a few, not 1,000)."""
    await asyncio.gather(*(_apply(conn, app, q) for q in queues))


async def _apply(conn: Any, app: App, q: str) -> None:
    found = declared(app, q)
    if found is not None:
        limit = next((t.group_limit for t in found if t.group_limit is not None), None)
        rate = next((t.group_rate for t in found if t.group_rate is not None), None)
        if limit is not None or rate is not None:
            await groups.set_defaults(conn, q, limit, rate)
            log.info("queue %s: group defaults limit=%s rate=%s", q, limit, rate)
        cap = next((t.queue_limit for t in found if t.queue_limit is not None), None)
        outcome, in_force = await jobs.declare_limit(conn, q, cap)
        if outcome == "kept" and str(cap or "") != in_force:
            log.warning("queue %s: keeping the cap %s set with `echomq limit` (the app "
                        "declares %s; `echomq limit %s none` gives the declared cap back at "
                        "the next worker start)", q, in_force or "none", cap or "none", q)
        elif outcome in ("applied", "cleared"):
            log.info("queue %s: cap %s", q, in_force or "removed")
