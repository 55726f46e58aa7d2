"""The Pump: an opt-in runtime part that keeps time moving for a set of queues.

Each tick, for every queue: promote the due scheduled jobs (``jobs.promote``, SERVER clock),
fire the due recurrences (``repeat.sweep``: HOST clock, one atomic ``fire`` per name) and
carry flow completions (``flows.carry``: the ends of flow children settled in the queue,
delivered to their parents' slots, where the last one releases the parent). It does not
reap: expired leases are the Consumer's recovery leg and the Metronome's job.

Any number of Pumps may run against the same queues: ``fire`` checks the score it read, so
two Pumps that see the same due registration enqueue one occurrence, and a Pump that dies
mid-tick leaves every registration either fired (and advanced) or untouched, never half.
The same holds for flow completions: a carry counts each child's end once, however many
Pumps deliver it and wherever one of them dies.
A failed tick (``WireError``) is logged and retried after a backoff on the tick interval.

Between ticks the Pump wakes early for the registry's next due run (``repeat.head``, read
after each sweep) and for a paused registration's end (``pause(until=)``), so neither waits
for the next tick. ``clock="server"`` plans every sweep on the server's ``TIME`` (read once
per sweep) instead of this host's clock: a host whose clock is off no longer shifts the
occurrences.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.runtime.beat import (
    DEGRADED_CEILING_MS,
    carry_flows,
    carry_outbox,
    default_owner,
    degraded_ms,
    promote_once,
)
from echomq.runtime.weather import Weather
from echomq.verbs import jobs, repeat

log = logging.getLogger("echomq.pump")

# The degraded-tick curve ceiling (the beat's): a Pump that cannot reach the server retries
# at most this far apart, whatever its tick.
MAX_DEGRADED_MS = DEGRADED_CEILING_MS
# Due registrations fired per pipelined round trip, and round trips per queue per tick.
SWEEP_BATCH = 1000
MAX_SWEEPS = 100

FlowHook = Callable[[Any, str], Awaitable[int]]
LEGS = ("promote", "repeats", "flows")


class Pump:
    """Promote, fire due repeats and carry flow completions, every tick.

    ``conn`` is an ``AsyncConnector``; ``queues`` the queue names it serves; ``tick_ms``
    the pause between ticks; ``promote_batch`` the bound of one promote call (a queue with
    a longer due backlog is promoted again in the same tick until it drains).
    ``flows``: a coroutine ``flows(conn, queue) -> int`` run each tick per queue in place
    of the built-in flow-completions leg (``carry_flows``). ``legs``: which of
    ``"promote"``, ``"repeats"``, ``"flows"`` a tick runs (all three by default; a worker's
    Pump runs the first two: its beats carry the flows). ``elect=True``: carry a
    queue only while holding its flow-carrier lease (``flows.hold_carrier``, three ticks on
    the SERVER clock), so many Pumps carry each entry once instead of racing over it.
    """

    def __init__(
        self,
        conn: Any,
        queues: list[str],
        tick_ms: int = 1000,
        promote_batch: int = 1000,
        flows: FlowHook | None = None,
        legs: tuple[str, ...] = LEGS,
        elect: bool = False,
        weather: Weather | None = None,
        clock: str = "host",
    ) -> None:
        if isinstance(queues, str):
            raise TypeError("queues must be a list of queue names, not one str")
        if not getattr(conn, "is_async", False):
            raise TypeError("a Pump runs on an AsyncConnector (await AsyncConnector.connect(url))")
        self.conn = conn
        #: where an outage is logged (once per outage: ``runtime.weather``)
        self.weather = weather if weather is not None else Weather("pump")
        self.queues = list(queues)
        for q in self.queues:
            keyspace.validate_queue(q)
        self.tick_ms = guard.span("tick_ms", tick_ms, minimum=1)
        self.promote_batch = guard.positive("promote_batch", promote_batch)
        self.flows = flows
        unknown = set(legs) - set(LEGS)
        if unknown:
            raise ValueError(f"unknown Pump legs: {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(LEGS)})")
        self.legs = tuple(legs)
        self.elect = elect
        if clock not in repeat.CLOCKS:
            raise ValueError(f"clock must be 'host' or 'server', not {clock!r}")
        self.clock = clock
        #: ms until the earliest next run or pause end the last tick saw (None: none)
        self.next_wake_ms: int | None = None
        self.owner = default_owner()
        self.sweep_batch = SWEEP_BATCH
        self.ticks = 0

    async def _promote(self, queue: str) -> int:
        total = 0
        while True:
            n: int = await promote_once(self.conn, queue, self.promote_batch)
            total += n
            if n < self.promote_batch:
                return total

    async def _sweep(self, queue: str) -> list[repeat.Fired]:
        # bounded sweeps, again while a full batch comes back and it moved something (an
        # unplannable or paused record stays due and must not spin the tick)
        out: list[repeat.Fired] = []
        for _ in range(MAX_SWEEPS):
            got = await repeat.sweep(self.conn, queue, None, self.sweep_batch,
                                     clock=self.clock)
            out.extend(got)
            if len(got) < self.sweep_batch or all(r.reason in ("invalid", "paused")
                                                  for r in got):
                break
        return out

    async def _plan_wake(self, queue: str, results: list[repeat.Fired]) -> int | None:
        """ms until this queue next needs a sweep: its registry's head (on the Pump's
        clock), or a paused registration's end, whichever is first."""
        waits = [r.resume_in_ms for r in results if r.resume_in_ms is not None]
        head = await repeat.head(self.conn, queue)
        if head is not None:
            now = (await jobs.server_now_ms(self.conn) if self.clock == "server"
                   else repeat.now_ms())
            if head > now:  # a due head that stays due is paused or invalid: the tick's
                waits.append(head - now)
        return min(waits) if waits else None

    async def carry_flows(self, queue: str) -> int:
        """Carry ``queue``'s flow outbox to the parents' slots until it is empty (bounded
        per tick); the count of children newly counted. An electing Pump carries only while
        it holds the queue's flow-carrier lease, and then also rolls back uncommitted
        admissions past their deadline (``beat.carry_flows``)."""
        if self.elect:
            return await carry_flows(self.conn, queue, self.owner, 3 * self.tick_ms,
                                     self.sweep_batch, MAX_SWEEPS)
        return await carry_outbox(self.conn, queue, self.sweep_batch, MAX_SWEEPS)

    async def deliver_flow_completions(self, queue: str) -> int:
        """The flow-completions leg for ``queue``, run once per tick after promote and the
        repeat sweep: ``carry_flows``, or the ``flows=`` hook when one was given."""
        if self.flows is None:
            return await self.carry_flows(queue)
        return int(await self.flows(self.conn, queue))

    async def tick(self) -> dict[str, Any]:
        """One pass over every queue; what it did.

        ``{"promoted": n, "fired": n, "skipped": n, "absent": n, "flows": n, "ids": [...],
        "queues": {queue: {"promoted", "fired", "skipped", "absent", "flows", "ids",
        "reasons"}}}`` where ``ids`` are the occurrences enqueued, in mint order, and
        ``reasons`` counts the skips by reason (``raced``, ``overlap``, ``limit``, ...).
        Clocks: promote reads the SERVER clock, the sweep the HOST clock.
        """
        report: dict[str, Any] = {
            "promoted": 0, "fired": 0, "skipped": 0, "absent": 0, "flows": 0, "ids": [],
            "queues": {},
        }  # fmt: skip
        wakes: list[int] = []
        for queue in self.queues:
            promoted = await self._promote(queue) if "promote" in self.legs else 0
            results = await self._sweep(queue) if "repeats" in self.legs else []
            if "repeats" in self.legs:
                wake = await self._plan_wake(queue, results)
                if wake is not None:
                    wakes.append(wake)
            flows = await self.deliver_flow_completions(queue) if "flows" in self.legs else 0
            ids = [i for r in results for i in r.ids]
            reasons: dict[str, int] = {}
            for r in results:
                if r.outcome == Outcome.SKIPPED:
                    reasons[r.reason] = reasons.get(r.reason, 0) + 1
            q = {
                "promoted": promoted,
                "fired": len(ids),
                "skipped": sum(reasons.values()),
                "absent": sum(1 for r in results if r.outcome == Outcome.ABSENT),
                "flows": flows,
                "ids": ids,
                "reasons": reasons,
            }
            report["queues"][queue] = q
            for key in ("promoted", "fired", "skipped", "absent", "flows"):
                report[key] += q[key]
            report["ids"].extend(ids)
        self.ticks += 1
        self.next_wake_ms = min(wakes) if wakes else None
        return report

    async def run(self, stop: asyncio.Event) -> None:
        """Tick every ``tick_ms`` until ``stop`` is set.

        A tick that fails on the wire is logged and the next one waits on an exponential
        curve over the tick (``backoff``), reset by the first good tick. A server refusal
        (say a wire-6 promote that meets a grouped row) is logged with its text and the
        loop goes on at its cadence: one bad queue must not stop recurrence everywhere.
        """
        degraded = 0
        while not stop.is_set():
            try:
                await self.tick()
                if degraded:
                    self.weather.answered("pump")
                degraded = 0
                wait_ms = self.tick_ms
                if self.next_wake_ms is not None:
                    # +1 ms: the clock the registry is priced on has passed the instant
                    wait_ms = max(1, min(wait_ms, self.next_wake_ms + 1))
            except errors.WireError as exc:
                degraded += 1
                wait_ms = degraded_ms(self.tick_ms, degraded)
                self.weather.failed("pump", exc, wait_ms)
            except errors.ServerError as exc:
                wait_ms = self.tick_ms
                log.error("pump tick refused by the server: %s", exc)
            if degraded:  # asleep on its backoff: woken when another loop gets through
                await self.weather.pause(wait_ms / 1000, stop)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait_ms / 1000)
