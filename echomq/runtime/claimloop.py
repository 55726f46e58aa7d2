"""The claim loop of a ``Consumer``: claim up to the free slots, then wait for more work.

Between claims an idle consumer does not poll: it blocks on the queue's wake list
(``BLPOP emq:{q}:wake``, timeout one beat, or less when a due instant noted by
``note_due`` comes first), which enqueue, promote and reap push a token onto, so an
enqueued job starts within a round trip. A full consumer waits for a slot instead. The
same ``BLPOP`` watches the due list (``emq:{q}:due``): its token says a run-at now leads
the schedule, and goes to the beat's legs (or, pooled, ``on_lead``) to re-plan their wake.

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
from collections.abc import Callable
from typing import Any

from echomq.core import errors, keyspace
from echomq.runtime.beat import degraded_ms
from echomq.runtime.events import Observer, emit
from echomq.runtime.slots import Slots
from echomq.runtime.spread import Spread
from echomq.runtime.stats import ConsumerStats
from echomq.runtime.taskstats import TaskTally
from echomq.runtime.weather import Weather
from echomq.verbs import jobs, metrics

KICK_SLACK_S = 0.1


class ClaimLoop:
    """Claims the jobs of ``spread``'s queues into ``slots`` and hands them to ``start``
    (the consumer's, with the queue they came from); ``queue`` names them in logs.

    ``led`` is set when a due token came and no ``on_lead`` takes it (a lone consumer: its
    legs wait on it); ``degraded`` and ``healthy`` are the consumer's legs' reports too.
    """

    def __init__(
        self,
        conn: Any,
        queue: str,
        *,
        spread: Spread,
        lease_ms: int,
        beat_ms: int,
        pooled: bool,
        slots: Slots,
        stats: ConsumerStats,
        meters: dict[str, metrics.Meter],
        on_event: Observer | None,
        start: Callable[[list[jobs.Claim], str], None],
        weather: Weather | None = None,
    ) -> None:
        self.conn = conn
        self.weather = weather if weather is not None else Weather(f"consumer {queue}")
        self.queue = queue
        self.spread = spread
        self.lease_ms = lease_ms
        self.beat_ms = beat_ms
        self.pooled = pooled
        self.slots = slots
        self.stats = stats
        self.meters = meters
        #: the per-task counts by queue (task metrics on): flushed with the meters, in the
        #: background
        self.tallies: dict[str, TaskTally] = {}
        self.on_event = on_event
        self.start = start
        #: pooled: who re-plans for a due token (the worker sets its Metronome's ``lead``);
        #: with none, a pooled consumer leaves the due list alone
        self.on_lead: Callable[[str], None] | None = None
        # a run-at now leads the schedule (a due token): the legs re-plan their wake
        self.led = asyncio.Event()
        self.streak = 0  # consecutive degraded beats
        self._degrading: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        # wake and due list -> the queue they belong to
        self._wakes = {keyspace.queue_key(q, "wake"): q for q in spread.queues}
        self._dues = {keyspace.queue_key(q, "due"): q for q in spread.queues}
        self._due_at: float | None = None  # the next noted due instant (loop clock)
        self._idle_until: float | None = None  # when the wait ends, if waiting
        self._kick = asyncio.Event()
        self._held_until: float | None = None  # no claims before then (loop clock)

    def hold(self, seconds: float) -> None:
        """Claim nothing for ``seconds`` (HOST monotonic): this consumer just handed a job
        back for another worker, which must get the chance to claim it first."""
        until = asyncio.get_running_loop().time() + seconds
        if self._held_until is None or until > self._held_until:
            self._held_until = until

    def holding(self) -> bool:
        """Whether a ``hold`` is under way (an ack flush claims nothing then either)."""
        return (self._held_until is not None
                and asyncio.get_running_loop().time() < self._held_until)

    def arm(self, stop: asyncio.Event) -> None:
        """A new run until ``stop``: its waits end at ``stop``, its streak starts at 0."""
        self._stop = stop
        self.streak = 0
        self._degrading = None

    async def run(self) -> None:
        """Claim up to the free slots and wait for more work, until the ``stop`` that
        ``arm`` set."""
        stop = self._stop
        assert stop is not None
        beat_s = self.beat_ms / 1000
        slots, spread = self.slots, self.spread
        led = False
        while not stop.is_set():
            try:
                for q, meter in self.meters.items():  # at most once a second, busy or idle
                    if meter.due():
                        meter.flush_soon(self.conn, q, self.streak)
                for q, tally in self.tallies.items():
                    if tally.due():
                        tally.flush_soon(self.conn, q)
                if self._held_until is not None:
                    left = self._held_until - asyncio.get_running_loop().time()
                    if left > 0:
                        await self._sleep(left)
                        continue
                    self._held_until = None
                free = slots.free()
                got = 0
                # a due token says a run-at leads the schedule, not that a job is ready:
                # no claim for it, straight back to the wait
                if free > 0 and not led:
                    got = await self.claim(free)
                    self.healthy()
                led = False
                if free <= 0:
                    await slots.wait(beat_s, stop)
                elif got < free and (spread.single or not spread.any_ready()):
                    # nothing left anywhere (a partition that gave its whole share may
                    # have more: the loop claims again at once)
                    led = await self._idle(self._idle_for(beat_s))
            except (errors.WireError, errors.CommandError) as exc:
                # CommandError too: a server that is loading, read-only after a failover or
                # out of memory answers with an error reply, and that is weather as well
                await self.degraded(exc)

    async def claim(self, free: int) -> int:
        """Claim up to ``free`` jobs (from the queue whose turn it is, among those with
        work) and start them; how many came."""
        slots = self.slots
        split = self.spread.split(free)
        asked = sum(split.values())
        if not asked:
            return 0
        slots.reserved += asked
        try:
            if self.spread.single:
                q, n = next(iter(split.items()))
                got = {q: await jobs.claim_many(self.conn, q, self.lease_ms, n)}
            else:
                got = (await jobs.ack_and_claim_queues(self.conn, {}, split, self.lease_ms))[1]
        finally:
            slots.reserved -= asked
        total = 0
        for q, claims in got.items():
            self.spread.claimed(q, split[q], len(claims))
            if claims:
                self.start(claims, q)
                total += len(claims)
        return total

    def note_due(self, ms: int | None, *, kick: bool = False) -> None:
        """Something becomes claimable by time alone ``ms`` from now: a run-at, a group's
        rate window or ``rate_limited`` block reopening, the queue's block ending (what
        ``jobs.next_due_ms`` reports, SERVER clock). An idle claim loop then wakes at that
        instant (HOST monotonic, from the span) instead of at its next beat; the claim it
        makes reopens the group on the server. A pool's Metronome feeds this too.
        ``kick``: also cut short a wait already under way that would outlast the instant
        (for a ``rate_limited`` span this consumer just set: no wake token comes for its
        end; a run-at needs no kick, its promote leaves a token)."""
        if ms is None:
            return
        if ms <= 0:
            # due now: a wait under way ends now and the claim it makes sees it (no await
            # lies between a claim's reply and the wait it starts, so none is missed)
            if self._idle_until is not None:
                self._kick.set()
            return
        at = asyncio.get_running_loop().time() + ms / 1000
        if self._due_at is None or at < self._due_at:
            self._due_at = at
        # a wait already under way that would outlast it by more than a blocking
        # timeout's own slack (the server's cron) is cut short and re-priced
        if kick and self._idle_until is not None and at + KICK_SLACK_S < self._idle_until:
            self._kick.set()

    def _idle_for(self, beat_s: float) -> float:
        """How long the claim loop blocks on its wake list: a beat, or less when a noted
        due instant comes first (+2 ms, so the SERVER clock has passed it). A due instant
        already behind us was served by the claim just made."""
        if self._due_at is None:
            return beat_s
        left = self._due_at - asyncio.get_running_loop().time()
        if left <= 0:
            self._due_at = None
            return beat_s
        return min(beat_s, left + 0.002)

    async def degraded(self, exc: Exception) -> None:
        """One degraded beat: sleep on the exponential curve over the beat, indexed by the
        streak. Both loops report here; while one sleeps, the other waits for that sleep
        instead of adding its own, so the streak counts beats, not failed calls."""
        if self._degrading is not None:
            await self._degrading.wait()
            return
        self._degrading = asyncio.Event()
        try:
            self.streak += 1
            ms = degraded_ms(self.beat_ms, self.streak)
            self.stats.degraded_sleeps.append(ms)
            self.weather.failed(f"consumer {self.queue}", exc, ms)
            emit(self.on_event, "degraded", self.queue, None, 0,
                 {"streak": self.streak, "sleep_ms": ms, "error": str(exc)})
            assert self._stop is not None
            await self.weather.pause(ms / 1000, self._stop)
        finally:
            done, self._degrading = self._degrading, None
            done.set()

    def healthy(self) -> None:
        """A leg answered: end a degraded streak, if one runs."""
        if self.weather.down:  # its lease checkpoints report under its name too
            self.weather.answered(f"consumer {self.queue}")
        if self.streak:
            emit(self.on_event, "recovered", self.queue, None, 0, {"streak": self.streak})
            self.streak = 0

    async def _idle(self, timeout: float) -> bool:
        """Block on the wake lists for up to ``timeout`` s (no hot polling), or until stop.
        The due lists too, unless pooled with no ``on_lead``: True when a due token came,
        which is handed to the legs (or ``on_lead``) to re-plan their wake. A wake token
        marks its queue as having work."""
        # BLPOP's timeout is in seconds (a double); 0 would mean forever.
        secs = max(timeout, 0.005)
        assert self._stop is not None
        self._kick.clear()
        self._idle_until = asyncio.get_running_loop().time() + secs
        with_due = not (self.pooled and self.on_lead is None)
        queues = self.spread.queues
        if len(queues) == 1 or not self.conn.cluster:
            keys = [*self._wakes, *(self._dues if with_due else ())]
            pops = [asyncio.ensure_future(self.conn.call("BLPOP", *keys, f"{secs:.3f}"))]
        else:  # a cluster: a blocking call may not span slots, so one per partition
            pops = [asyncio.ensure_future(self.conn.call(
                "BLPOP", keyspace.queue_key(q, "wake"),
                *((keyspace.queue_key(q, "due"),) if with_due else ()), f"{secs:.3f}"))
                for q in queues]
        stopper = asyncio.ensure_future(self._stop.wait())
        kicked = asyncio.ensure_future(self._kick.wait())
        try:
            await asyncio.wait({*pops, stopper, kicked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._idle_until = None
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
                self.spread.wake(self._wakes[key])
                continue
            led = True
            if not self.pooled:
                self.led.set()
            elif self.on_lead is not None:
                self.on_lead(self._dues[key])
        return led

    async def _sleep(self, seconds: float) -> None:
        assert self._stop is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
