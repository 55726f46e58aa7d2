"""The claim loop of a ``Consumer``: claim up to the free slots, then wait for more work.

Between claims an idle consumer does not poll: it blocks on the queue's wake list
(``BLPOP emq:{q}:wake``, timeout one beat, or less when a due instant noted in the
consumer's ``Context.wake`` comes first), which enqueue, promote and reap push a token onto, so an
enqueued job starts within a round trip. A full consumer waits for a slot instead. The
same ``BLPOP`` watches the due list (``emq:{q}:due``): its token says a run-at now leads
the schedule, and goes to the beat's legs (or, pooled, ``on_lead``) to re-plan their wake.

A worker's pooled consumers on a single server wait under its one ``BLPOP`` instead
(``runtime.waker``): an idle loop rests on its kick, which the waker gives when its queue's
token comes, and makes no call of its own (``_rest``).

A partitioned queue's consumer has one claim loop for all its partitions (``queues``):
the partitions that have work take turns (``runtime.spread``), each claim asking the one
whose turn it is for every free slot, and an idle loop blocks on every partition's wake and
due lists at once (one ``BLPOP``; on a cluster, whose partitions live on several slots, one
per partition, the first to answer ending the others).

Degraded mode: a ``WireError`` on any leg does not end the loop. It sleeps
``backoff.delay_ms(("exponential", beat_ms, max(30_000, beat_ms)), streak)`` where streak
counts consecutive degraded beats, reports to the process's ``Weather`` (one WARNING when
an outage starts, one INFO when it ends: ``runtime.weather``), and resumes when the server
answers.

Clocks: every wait here is paced on the HOST monotonic clock (the event loop's); the due
instants come from the SERVER clock as spans.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from typing import Any

from echomq.core import errors, keyspace
from echomq.runtime.beat import degraded_ms
from echomq.runtime.context import Context
from echomq.runtime.events import emit
from echomq.runtime.waker import Waker
from echomq.verbs import jobs

#: how long (s) a consumer under the worker's one wait rests with nothing noted: its kick
#: (a token, a due instant, the survey) ends the rest; this is only the backstop
REST_S = 30.0


class ClaimLoop:
    """Claims the jobs of the consumer's queues (``ctx.spread``) into its slots and starts
    them (``ctx.start``, with the queue they came from).

    ``degraded`` and ``healthy`` are the consumer's legs' reports too.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: pooled: who re-plans for a due token (the worker sets its Metronome's ``lead``);
        #: with none, a pooled consumer leaves the due list alone
        self.on_lead: Callable[[str], None] | None = None
        self.streak = 0  # consecutive degraded beats
        self._degrading: asyncio.Event | None = None
        #: the id of a claim sent and not answered (``jobs.claim_step``), kept for its retry
        self.claim_id: str | None = None
        #: pooled: told the queue of each claim that got jobs (the Metronome's ``touch``)
        self.on_claimed: Callable[[str], None] | None = None
        #: a pooled worker's one wait (``runtime.waker``); None: this loop blocks itself
        self.waker: Waker | None = None
        # wake and due list -> the queue they belong to
        self._wakes = {keyspace.queue_key(q, "wake"): q for q in ctx.queues}
        self._dues = {keyspace.queue_key(q, "due"): q for q in ctx.queues}

    def arm(self) -> None:
        """A new run (until ``ctx.stop``): its streak starts at 0."""
        self.streak = 0
        self._degrading = None

    async def run(self) -> None:
        """Claim up to the free slots and wait for more work, until ``ctx.stop``."""
        ctx = self.ctx
        stop = ctx.stop
        assert stop is not None
        beat_s = ctx.beat_ms / 1000
        slots, spread, conn = ctx.slots, ctx.spread, ctx.conn
        led = False
        while not stop.is_set():
            try:
                for q, meter in ctx.meters.items():  # at most once a second, busy or idle
                    if meter.due():
                        meter.flush_soon(conn, q, self.streak)
                for q, tally in ctx.tallies.items():
                    if tally.due():
                        tally.flush_soon(conn, q)
                if ctx.held_until is not None:
                    left = ctx.held_until - asyncio.get_running_loop().time()
                    if left > 0:
                        await self._sleep(left)
                        continue
                    ctx.held_until = None
                free = slots.free()
                got = 0
                # a due token says a run-at leads the schedule, not that a job is ready:
                # no claim for it, straight back to the wait
                if free > 0 and not led:
                    ctx.wake.kick.clear()  # a kick from here on claims again
                    got = await self.claim(free)
                    self.healthy()
                led = False
                if free <= 0:
                    await slots.wait(beat_s, stop)
                elif got < free and (spread.single or not spread.any_ready()):
                    # nothing left anywhere (a partition that gave its whole share may
                    # have more: the loop claims again at once)
                    led = (await self._idle(ctx.wake.idle_for(beat_s))
                           if self.waker is None else await self._rest(beat_s))
            except (errors.WireError, errors.CommandError) as exc:
                # CommandError too: a server that is loading, read-only after a failover or
                # out of memory answers with an error reply, and that is weather as well
                await self.degraded(exc)

    async def claim(self, free: int) -> int:
        """Claim up to ``free`` jobs (from the queue whose turn it is, among those with
        work) and start them; how many came."""
        ctx = self.ctx
        slots, spread = ctx.slots, ctx.spread
        split = spread.split(free)
        asked = sum(split.values())
        if not asked:
            return 0
        slots.reserved += asked
        try:
            if spread.single:
                q, n = next(iter(split.items()))
                # a claim whose reply is lost is sent again with its id at the next try:
                # the jobs it leased come back instead of waiting out their lease
                if self.claim_id is None:
                    self.claim_id = secrets.token_hex(8)
                got = {q: await jobs.claim_many(ctx.conn, q, ctx.lease_ms, n,
                                                self.claim_id)}
                self.claim_id = None
            else:
                got = (await jobs.ack_and_claim_queues(ctx.conn, {}, split, ctx.lease_ms))[1]
        finally:
            slots.reserved -= asked
        total = 0
        for q, claims in got.items():
            spread.claimed(q, split[q], len(claims))
            if claims:
                ctx.start(claims, q)
                total += len(claims)
                if self.on_claimed is not None:
                    self.on_claimed(q)
        return total

    async def degraded(self, exc: Exception) -> None:
        """One degraded beat: sleep on the exponential curve over the beat, indexed by the
        streak. Both loops report here; while one sleeps, the other waits for that sleep
        instead of adding its own, so the streak counts beats, not failed calls."""
        if self._degrading is not None:
            await self._degrading.wait()
            return
        ctx = self.ctx
        self._degrading = asyncio.Event()
        try:
            self.streak += 1
            ms = degraded_ms(ctx.beat_ms, self.streak)
            ctx.stats.degraded_sleeps.append(ms)
            ctx.weather.failed(f"consumer {ctx.queue}", exc, ms)
            emit(ctx.on_event, "degraded", ctx.queue, None, 0,
                 {"streak": self.streak, "sleep_ms": ms, "error": str(exc)})
            assert ctx.stop is not None
            await ctx.weather.pause(ms / 1000, ctx.stop)
        finally:
            done, self._degrading = self._degrading, None
            done.set()

    def healthy(self) -> None:
        """A leg answered: end a degraded streak, if one runs."""
        ctx = self.ctx
        if ctx.weather.down:  # its lease checkpoints report under its name too
            ctx.weather.answered(f"consumer {ctx.queue}")
        if self.streak:
            emit(ctx.on_event, "recovered", ctx.queue, None, 0, {"streak": self.streak})
            self.streak = 0

    async def _idle(self, timeout: float) -> bool:
        """Block on the wake lists for up to ``timeout`` s (no hot polling), or until stop.
        The due lists too, unless pooled with no ``on_lead``: True when a due token came,
        which is handed to the legs (``ctx.wake.led``) or ``on_lead`` to re-plan their
        wake. A wake token marks its queue as having work."""
        ctx, wake = self.ctx, self.ctx.wake
        conn = ctx.conn
        # BLPOP's timeout is in seconds (a double); 0 would mean forever; and short of the
        # socket timeout, which would otherwise cut a healthy wait as an outage
        secs = conn.block_for(max(timeout, 0.005))
        assert ctx.stop is not None
        wake.kick.clear()
        wake.idle_until = asyncio.get_running_loop().time() + secs
        with_due = not (ctx.pooled and self.on_lead is None)
        queues = ctx.queues
        if len(queues) == 1 or not conn.cluster:
            keys = [*self._wakes, *(self._dues if with_due else ())]
            pops = [asyncio.ensure_future(conn.call("BLPOP", *keys, f"{secs:.3f}"))]
        else:  # a cluster: a blocking call may not span slots, so one per partition
            pops = [asyncio.ensure_future(conn.call(
                "BLPOP", keyspace.queue_key(q, "wake"),
                *((keyspace.queue_key(q, "due"),) if with_due else ()), f"{secs:.3f}"))
                for q in queues]
        stopper = asyncio.ensure_future(ctx.stop.wait())
        kicked = asyncio.ensure_future(wake.kick.wait())
        try:
            await asyncio.wait({*pops, stopper, kicked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            wake.idle_until = None
            stopper.cancel()
            kicked.cancel()
            for pop in pops:
                if not pop.done():
                    pop.cancel()
                    with contextlib.suppress(asyncio.CancelledError, errors.EchoMQError):
                        await pop
        led = False
        for pop in pops:
            if not pop.done() or pop.cancelled():
                continue
            got = pop.result()  # a wire error surfaces here and degrades the beat
            if not got:
                continue
            key = _text(got[0])
            if key in self._wakes:
                ctx.spread.wake(self._wakes[key])
                continue
            led = True
            if not ctx.pooled:
                wake.led.set()
            elif self.on_lead is not None:
                self.on_lead(self._dues[key])
        return led

    async def _rest(self, beat_s: float) -> bool:
        """Idle under the worker's one wait (``waker``): until a kick (its token came, a
        noted due instant is now, the survey saw ready jobs), or the next noted due
        instant, or a beat while gathered numbers wait for their flush. No call."""
        ctx, wake, waker = self.ctx, self.ctx.wake, self.waker
        assert waker is not None and ctx.stop is not None
        if not all(waker.watches(q) for q in ctx.queues):  # back from full: until the
            return await self._idle(wake.idle_for(beat_s))  # next wait takes it in
        news = any(m.durations or m.beat_s is not None for m in ctx.meters.values()) or any(
            t.pending for t in ctx.tallies.values())
        timeout = wake.idle_for(beat_s if news else REST_S)
        if wake.kick.is_set():
            return False
        wake.idle_until = asyncio.get_running_loop().time() + timeout
        stopper = asyncio.ensure_future(ctx.stop.wait())
        kicked = asyncio.ensure_future(wake.kick.wait())
        try:
            await asyncio.wait({stopper, kicked}, timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            wake.idle_until = None
            stopper.cancel()
            kicked.cancel()
        return False

    def kick(self, queue: str) -> None:
        """The worker's wait popped ``queue``'s wake token: it has work, claim now."""
        self.ctx.spread.wake(queue)
        self.ctx.wake.kick.set()

    async def _sleep(self, seconds: float) -> None:
        assert self.ctx.stop is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.ctx.stop.wait(), seconds)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
