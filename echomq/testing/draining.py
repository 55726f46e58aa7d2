"""``drain``: run an app's claimable jobs in the test process, through the worker's path.

A ``Consumer`` per served queue (one slot each, the app's router, leases and retention:
what a ``Worker`` builds) is driven by hand, in rounds. Each round starts from one
read-only ``testbed.standing`` read of every queue (one round trip): the recovery legs
(reap, promote, the deadline sweep, flow completions) run only for a queue where that
read shows them work, then each queue with work claims one job with the real claim
transition. The handler runs as a worker runs it (argument binding, ``current_job()``,
timeout, verdicts) and its outcome is settled by the real ack/retry/delay transitions,
callbacks and flow hand-offs included; while the round runs, each ack claims its queue's
next job in the same round trip, as a running worker's does. Rounds go on until one claims
nothing, so jobs that drained jobs enqueue (a chain's next step, a released flow parent, a
callback's job) run too, up to ``limit`` runs. ``with_scheduled`` first makes the schedule
due (a retry's run-at too) in every round; ``with_recurrences`` registers the app's
recurrences (as a worker does at start) and fires the due ones in every round.

The counts come from the consumer's timeline (``runtime.events``: what the transitions
answered), ``expired`` from the queues' server-side counters (the first and last standing
reads). Clocks: the transitions read the SERVER clock; recurrences the app's
``recurrence_clock``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from echomq.core import guards as guard
from echomq.runtime.consumer import Consumer
from echomq.runtime.events import Event, Observer
from echomq.runtime.handler import Job
from echomq.runtime.route import Route
from echomq.tasks import lifecycle
from echomq.testing import loops
from echomq.verbs import repeat, testbed, travel

if TYPE_CHECKING:
    from echomq.tasks.app import App

#: how long (s) a drain waits for one job's handler and settlement before it gives up on
#: it (its lease then lapses as a dead worker's would); a task's own timeout ends it sooner
GRACE_S = 300.0
DEFAULT_LIMIT = 10_000


@dataclass
class Drained:
    """What a ``drain`` (or an ``inline`` block) ran: how many runs ended each way, the
    completed jobs' return values (``results``: JSON round-tripped, as a kept result reads)
    and each failed job's last error (``errors``: ``"Type: text"``), by job id."""

    completed: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0
    expired: int = 0
    delayed: int = 0  # a Delay, a rate limit or a hand-back: back to wait, no attempt spent
    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ran(self) -> int:
        """Runs that ended (completed, retried, dead, cancelled or delayed)."""
        return self.completed + self.retried + self.dead + self.cancelled + self.delayed

    def add(self, other: Drained) -> None:
        """Fold ``other`` into this one (an ``inline`` block's drains)."""
        for name in ("completed", "retried", "dead", "cancelled", "expired", "delayed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.results.update(other.results)
        self.errors.update(other.errors)


_COUNTED = {"completed": "completed", "retrying": "retried", "dead": "dead",
            "cancelled": "cancelled", "delayed": "delayed", "rate_limited": "delayed",
            "handed_back": "delayed"}


class _Recorder:
    """The consumers' observer: counts each settled run, keeps errors and results, then
    hands the event to the app's own observer (if any)."""

    def __init__(self, out: Drained, returned: dict[str, Any], forward: Observer | None):
        self.out, self.returned, self.forward = out, returned, forward
        self.started, self.limit, self.stop = 0, 0, asyncio.Event()

    def stop_at(self, runs: int) -> asyncio.Event:
        """The event set once ``runs`` runs started (at once if ``runs`` <= 0): a chained
        ack claims no more."""
        self.limit = runs
        if runs <= 0:
            self.stop.set()
        return self.stop

    def __call__(self, ev: Event) -> None:
        if ev.kind == "started":
            self.started += 1
            if self.started >= self.limit:
                self.stop.set()
        name = _COUNTED.get(ev.kind)
        if name is not None and ev.job_id is not None:
            setattr(self.out, name, getattr(self.out, name) + 1)
            if ev.kind == "completed":
                self.out.results[ev.job_id] = self.returned.pop(ev.job_id, None)
                self.out.errors.pop(ev.job_id, None)
            elif ev.info.get("error"):
                self.out.errors[ev.job_id] = str(ev.info["error"])
        if self.forward is not None:
            self.forward(ev)


def round_trip(value: Any) -> Any:
    """``value`` as a kept result reads it back (JSON), or as is when JSON cannot carry it
    (a task that keeps no result may return anything)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return value


def _keeping(route: Route, returned: dict[str, Any]) -> Route:
    """``route`` whose handler also notes its return value by job id (same sync or async
    shape, so the runner calls it the same way)."""
    handler = route.handler
    if inspect.iscoroutinefunction(handler):
        async def noting_async(job: Job) -> Any:
            value = await handler(job)
            returned[job.id] = round_trip(value)
            return value

        return dataclasses.replace(route, handler=noting_async)

    def noting(job: Job) -> Any:
        value = handler(job)
        returned[job.id] = round_trip(value)
        return value

    return dataclasses.replace(route, handler=noting)


def _router(app: App, queue: str, returned: dict[str, Any]) -> Callable[[Job], Route]:
    route = app.router(queue)
    return lambda job: _keeping(route(job), returned)


def served(app: App, queues: Iterable[str] | None) -> dict[str, list[str]]:
    """The queues a drain serves: ``queues`` (a partitioned queue by its logical name), or
    every queue of the app's tasks (the default queue for an app without tasks), as a
    worker started without ``queues`` serves."""
    names = list(queues) if queues is not None else (
        list(dict.fromkeys(t.queue for t in app.tasks.values())) or [app.default_queue])
    return app.served(names)


async def adrain(app: App, queues: Iterable[str] | None = None, *,
                 with_scheduled: bool = False, with_recurrences: bool = False,
                 limit: int = DEFAULT_LIMIT) -> Drained:
    """``drain``, awaited on the running loop (for ``async def`` tests). The app's
    ``on_startup``/``on_shutdown`` hooks run around it, as around a worker's life, so
    handlers read ``current_job().context``."""
    guard.positive("limit", limit)
    if isinstance(queues, str):
        raise TypeError("queues is a list of queue names, not one str")
    async with lifecycle.hooks(app):
        return await _adrain(app, queues, with_scheduled, with_recurrences, limit)


async def _adrain(app: App, queues: Iterable[str] | None, with_scheduled: bool,
                  with_recurrences: bool, limit: int) -> Drained:
    conn = await loops.connector(app)
    by_name = served(app, queues)
    names = [q for parts in by_name.values() for q in parts]
    out = Drained()
    returned: dict[str, Any] = {}
    observer = _Recorder(out, returned, app.on_event)
    consumers = [
        Consumer(conn, name, router=_router(app, parts[0], returned), concurrency=1,
                 lease_ms=min(app.lease_for(p) for p in parts), retention=app.retention,
                 on_event=observer, partitions=parts if len(parts) > 1 else None,
                 executor=loops.executor())
        for name, parts in by_name.items()
    ]
    recurrences = [r for r in app.recurrences if r.queue in names] if with_recurrences else []
    for r in recurrences:  # what a worker does at start (same definition: no write)
        await repeat.put(conn, r.queue, r.name, r.spec)
    # each queue's jobs run back to back: an ack claims the next job in its round trip, as
    # a running worker's does. Each consumer holds at most one job claimed but not yet
    # started, so the acks stop claiming n - 1 runs short of ``limit`` (n consumers) and
    # the rounds' own claims take the rest: never more than ``limit`` runs
    stop = observer.stop_at(limit - len(consumers) + 1)
    found = await testbed.standing(conn, names)
    expired_before = sum(s.expired for s in found.values())

    def ran() -> int:
        return sum(c.stats.claimed for c in consumers)

    try:
        while ran() < limit and (recurrences or any(
                s.claimable or s.legs or (with_scheduled and s.scheduled)
                for s in found.values())):
            due: set[str] = set()
            for q, s in found.items():
                if with_scheduled and s.scheduled:
                    await travel.schedule_due(conn, q)
                    due.add(q)
                elif s.legs:
                    due.add(q)
            for q in dict.fromkeys(r.queue for r in recurrences):
                await repeat.sweep(conn, q, clock=app.recurrence_clock)
            for c in consumers:
                if recurrences or due.intersection(c.queues):
                    await c.legs.once()  # a beat finding nothing to do is skipped
                for q in c.queues:  # a partition a chained claim found empty has work now
                    if found[q].claimable or q in due:
                        c.ctx.spread.wake(q)
            ready = [c for c in consumers if recurrences or any(
                found[q].claimable or q in due for q in c.queues)]
            claimed = await _claims(consumers, ready, limit - ran(), stop)
            for c in consumers:
                await c.drain(GRACE_S)
            _chaining(consumers, stop, on=False)
            found = await testbed.standing(conn, names)
            if not claimed:
                break
    except BaseException:  # each round settled what it claimed: only a raise leaves runs
        _chaining(consumers, stop, on=False)
        for c in consumers:
            await c.drain(0)
        raise
    out.expired = sum(s.expired for s in found.values()) - expired_before
    return out


async def _claims(consumers: list[Consumer], ready: list[Consumer], room: int,
                  stop: asyncio.Event) -> int:
    """A round's claims, one per ``ready`` consumer while ``room`` runs are left; the acks
    then claim on (``_chaining``). How many jobs came."""
    if len(ready) <= room:
        # side by side: all sent before any reply can start a job (so before any chained
        # claim), on a count read while nothing was in flight
        _chaining(consumers, stop, on=True)
        return sum(await asyncio.gather(*(_claim(c) for c in ready)))
    claimed = 0
    for c in ready:  # near the limit: one by one, as long as runs are left
        if claimed < room:
            claimed += await _claim(c)
    _chaining(consumers, stop, on=True)
    return claimed


async def _claim(c: Consumer) -> int:
    """One claim for ``c``'s free slot. A partitioned queue's consumer claims from the
    partition whose turn it is: one found empty leaves the turn, and the next is asked,
    until one gives a job or each was asked."""
    for _ in c.queues:
        got = await c.claims.claim(c.ctx.slots.free())
        if got:
            return got
    return 0


def _chaining(consumers: list[Consumer], stop: asyncio.Event, *, on: bool) -> None:
    """Let (or stop letting) each of ``consumers``' acks claim its next job in the same
    round trip (``Settler``: an ack flush claims while its consumer runs and ``stop`` is
    not set), so a drain settles one job and takes the next without a beat between."""
    for c in consumers:
        c.ctx.stop, c.ctx.running = stop, on


def drain(app: App, queues: Iterable[str] | None = None, *, with_scheduled: bool = False,
          with_recurrences: bool = False, limit: int = DEFAULT_LIMIT) -> Drained:
    """Run ``app``'s claimable jobs on ``queues`` (default: every queue of its tasks) in
    this process, one at a time per queue, through the worker's own path, until nothing is
    claimable or ``limit`` runs were made; jobs the drained jobs enqueue run too.
    ``with_scheduled``: scheduled jobs (retries and delays included) run as if due now;
    ``with_recurrences``: the app's recurrences are registered and the due ones fired.
    Returns the ``Drained`` counts, results and errors. From an ``async def`` test,
    ``await testing.adrain(...)`` runs on the test's loop instead."""
    return loops.run(lambda: adrain(app, queues, with_scheduled=with_scheduled,
                                    with_recurrences=with_recurrences, limit=limit), app)
