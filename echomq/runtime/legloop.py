"""A lone consumer's legs: the recovery leg (``reap``) and ``promote``, once a beat.

They run beside the claim loop rather than inside it: a server's blocking-command timeouts
are only as fine as its cron (100 ms at the default hz), so a beat paced by BLPOP timeouts
would drift to two. Promote and reap push a wake token, so work they release wakes the claim
loop at once. Between beats the loop also wakes at the next scheduled run-at (read on the
SERVER clock after each promote) and promotes then, so a scheduled job starts within a few
ms of its run-at, not a beat later; a due token the claim loop pops (``ctx.wake.led``: a
new run-at leads the schedule) cuts its sleep short to re-read the head. A pooled consumer
has none of this: its worker's Metronome runs the legs.

Clocks: the beat and the sleeps are paced on the HOST monotonic clock (the event loop's);
run-ats and the instants they promote at are the SERVER clock's, read as spans.
"""

from __future__ import annotations

import asyncio
import time

from echomq.core import errors
from echomq.runtime.beat import LegCounts, Legs, promote_due, run_legs, wake_delay
from echomq.runtime.claimloop import ClaimLoop
from echomq.runtime.context import Context
from echomq.verbs import jobs


class LegLoop:
    """The legs of ``ctx``'s queues with ``legs``' settings; weather is reported to
    ``claims`` (one streak for the consumer)."""

    def __init__(self, ctx: Context, legs: Legs, claims: ClaimLoop) -> None:
        self.ctx = ctx
        self.legs = legs
        self.claims = claims
        self.beat_no = 0

    async def once(self) -> None:
        """One beat's legs for every queue, by hand (``Consumer.beat``), counted."""
        ctx = self.ctx
        self.beat_no += 1
        for q in ctx.queues:
            counts = await run_legs(ctx.conn, q, self.legs, self.beat_no)
            ctx.stats.reaped += counts.reaped
            ctx.stats.promoted += counts.promoted

    async def run(self, stop: asyncio.Event) -> None:
        """The legs once a beat (HOST monotonic), and at each due run-at, until ``stop``."""
        ctx, claims, wake = self.ctx, self.claims, self.ctx.wake
        loop = asyncio.get_running_loop()
        beat_s = ctx.beat_ms / 1000
        next_at = loop.time()
        due_wake = False
        while not stop.is_set():
            try:
                counts = await self._beat_legs(due_wake)
            except (errors.WireError, errors.CommandError) as exc:
                await claims.degraded(exc)
                next_at, due_wake = loop.time(), False
                continue
            claims.healthy()
            ctx.stats.reaped += counts.reaped
            ctx.stats.promoted += counts.promoted
            if due_wake and not counts.promoted:
                # the instant was no run-at (a pause's end, a group reopening): no promote
                # left a wake token, so the idle claim loop is told it is due now
                wake.note(0)
            wake.note(counts.next_due_ms)
            if not due_wake:
                next_at += beat_s
                if next_at < loop.time():  # a slow beat: do not catch up with a burst
                    next_at = loop.time()
            delay, due_wake = wake_delay(next_at - loop.time(), counts.next_due_ms)
            try:
                due_wake = await self._sleep_replanning(next_at, delay, due_wake, stop)
            except (errors.WireError, errors.CommandError) as exc:
                await claims.degraded(exc)
                next_at, due_wake = loop.time(), False

    async def _beat_legs(self, due_wake: bool) -> LegCounts:
        """The legs for every queue (a run-at that fell between beats: promote only); the
        counts summed, the next due instant the earliest."""
        ctx = self.ctx
        total = LegCounts()
        if not due_wake:
            self.beat_no += 1
        for q in ctx.queues:
            if due_wake:
                counts = await promote_due(ctx.conn, q, self.legs, LegCounts())
            else:
                began = time.monotonic()
                counts = await run_legs(ctx.conn, q, self.legs, self.beat_no)
                ctx.meters[q].beat_s = time.monotonic() - began
            total.reaped += counts.reaped
            total.promoted += counts.promoted
            total.next_due_ms = earliest(total.next_due_ms, counts.next_due_ms)
        return total

    async def _sleep_replanning(self, next_at: float, delay: float, due_wake: bool,
                                stop: asyncio.Event) -> bool:
        """Sleep ``delay`` (HOST monotonic) toward the beat at ``next_at`` (loop clock), or
        less: a due token (a new run-at leads the schedule) cuts the sleep short to re-read
        the head (``jobs.next_due_ms``, SERVER clock) and re-plan it. One read per new head,
        none per idle beat. Returns whether the wake is for a due run-at."""
        ctx = self.ctx
        loop = asyncio.get_running_loop()
        while await self._sleep_unless_led(delay, stop):
            ms = None
            for q in ctx.queues:
                ms = earliest(ms, await jobs.next_due_ms(ctx.conn, q))
            ctx.wake.note(ms)
            delay, due_wake = wake_delay(next_at - loop.time(), ms)
        return due_wake

    async def _sleep_unless_led(self, seconds: float, stop: asyncio.Event) -> bool:
        """Sleep ``seconds`` or until stop; True (and the signal consumed) when a due token
        came first."""
        led = self.ctx.wake.led
        if not led.is_set() and seconds > 0:
            waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(led.wait())}
            _done, pending = await asyncio.wait(waits, timeout=seconds,
                                                return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
        if led.is_set() and not stop.is_set():
            led.clear()
            return True
        return False


def earliest(a: int | None, b: int | None) -> int | None:
    """The sooner of two "ms from now" instants (``None``: none)."""
    return b if a is None else a if b is None else min(a, b)
