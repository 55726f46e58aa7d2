"""What one consumer's parts share: its claim loop, its settler and its legs read one
``Context`` instead of each being wired with the consumer's callbacks.

It holds the consumer's settings (connection, queues, lease, beat), its shared state (the
``spread`` of its queues, its ``slots``, ``stats``, ``meters`` and task ``tallies``, its
lease ``checkpoints``), whether it runs and claims (``running``, ``stop``, a ``hold``
after a hand-back), its idle claim loop's ``wake`` plan, and how a claimed job runs
(``start``: a task per job in ``slots.inflight``, running the consumer's ``process``).

Clocks: the hold and the wake plan are on the HOST monotonic clock (the event loop's); the
due instants noted arrive as SERVER-clock spans.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from echomq.runtime.batching import BatchNotices
from echomq.runtime.events import Observer, emit
from echomq.runtime.handler import Job
from echomq.runtime.leases import Checkpoints
from echomq.runtime.meter import Meter
from echomq.runtime.slots import Slots
from echomq.runtime.spread import Spread
from echomq.runtime.stats import ConsumerStats
from echomq.runtime.taskstats import TaskTally
from echomq.runtime.weather import Weather
from echomq.verbs import jobs
from echomq.verbs.retention import Retention

if TYPE_CHECKING:
    from echomq.runtime.chunking import ChunkPath

#: a noted instant cuts a wait short only when it comes this much (s) before the wait's end
KICK_SLACK_S = 0.1


class Wake:
    """When an idle claim loop wakes besides its wake list: the next due instant noted
    (``note``), a kick that ends a wait under way, and ``led`` (a due token came that no
    ``on_lead`` takes: a lone consumer's legs re-plan on it)."""

    __slots__ = ("at", "idle_until", "kick", "led")

    def __init__(self) -> None:
        self.at: float | None = None  # the next noted due instant (loop clock)
        self.idle_until: float | None = None  # when the wait under way ends, if one is
        self.kick = asyncio.Event()
        self.led = asyncio.Event()

    def note(self, ms: int | None, *, kick: bool = False) -> None:
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
            if self.idle_until is not None:
                self.kick.set()
            return
        at = asyncio.get_running_loop().time() + ms / 1000
        if self.at is None or at < self.at:
            self.at = at
        # a wait already under way that would outlast it by more than a blocking
        # timeout's own slack (the server's cron) is cut short and re-priced
        if kick and self.idle_until is not None and at + KICK_SLACK_S < self.idle_until:
            self.kick.set()

    def idle_for(self, beat_s: float) -> float:
        """How long the claim loop blocks on its wake list: a beat, or less when a noted
        due instant comes first (+2 ms, so the SERVER clock has passed it). A due instant
        already behind us was served by the claim just made."""
        if self.at is None:
            return beat_s
        left = self.at - asyncio.get_running_loop().time()
        if left <= 0:
            self.at = None
            return beat_s
        return min(beat_s, left + 0.002)


class Context:
    """One consumer's settings and shared state (see the module's docstring); ``process``
    runs one claimed job to its settlement (the consumer's)."""

    def __init__(
        self,
        conn: Any,
        queue: str,
        queues: list[str],
        *,
        concurrency: int,
        lease_ms: int,
        beat_ms: int,
        pooled: bool,
        retention: Retention,
        on_event: Observer | None,
        weather: Weather,
        checkpoints: Checkpoints,
        task_metrics: bool,
        process: Callable[[Job], Coroutine[Any, Any, None]],
    ) -> None:
        self.conn = conn
        self.queue = queue
        self.lease_ms = lease_ms
        self.beat_ms = beat_ms
        self.pooled = pooled
        self.retention = retention
        self.on_event = on_event
        self.weather = weather
        self.checkpoints = checkpoints
        self.process = process
        self.spread = Spread(queues, beat_ms / 1000)
        self.slots = Slots(concurrency)
        self.stats = ConsumerStats()
        # durations etc., folded into each queue's server-side metrics
        self.meters = {q: Meter() for q in queues}
        #: the per-task counts by queue (task metrics on), flushed to each queue
        self.tallies = {q: TaskTally() for q in queues} if task_metrics else {}
        self.wake = Wake()
        self.running = False
        self.stop: asyncio.Event | None = None
        self.held_until: float | None = None  # no claims before then (loop clock)
        #: the ends owed to batches (their members' acks, deaths, cancels that landed)
        self.batches = BatchNotices(conn)
        #: the chunk tasks' path (``runtime.chunking``), when the consumer serves some
        self.chunks: ChunkPath | None = None

    @property
    def queues(self) -> list[str]:
        return self.spread.queues

    def start(self, claims: list[jobs.Claim], queue: str) -> None:
        """Start a task per job claimed from ``queue`` (its handler runs there, then its
        settlement); the lease checkpoints run while any is held."""
        loop = asyncio.get_running_loop()
        conn, inflight, process = self.conn, self.slots.inflight, self.process
        chunks = self.chunks
        for claim in claims:
            job = Job(queue, claim.id, claim.token, claim.payload, conn, loop)
            if chunks is not None and chunks.take(job):
                continue
            inflight[claim.id] = loop.create_task(process(job))
        self.stats.claimed += len(claims)
        self.checkpoints.ensure(self.busy)

    def spawn(self, job: Job, work: Awaitable[None]) -> None:
        """Run ``work`` (a patient settlement) in a task that holds ``job``'s slot."""
        async def holding() -> None:
            try:
                await work
            finally:
                self.ended(job.id)

        self.slots.inflight[job.id] = asyncio.get_running_loop().create_task(holding())

    def ended(self, job_id: str) -> None:
        """``job_id``'s task is done: its slot is free."""
        slots = self.slots
        slots.inflight.pop(job_id, None)
        if slots.waiter is not None:
            slots.freed()

    def busy(self) -> bool:
        """Whether the consumer holds jobs: its lease checkpoints go on while it does, and
        stop when it is idle (a claim starts them again), so an idle queue costs no
        wakeups a beat."""
        return bool(self.slots.inflight)

    def claiming(self) -> bool:
        """Whether an ack flush may claim: the consumer runs, is not stopping and holds
        no claims (after a hand-back)."""
        return (self.running and not (self.stop is not None and self.stop.is_set())
                and not self.holding())

    def hold(self, seconds: float) -> None:
        """Claim nothing for ``seconds`` (HOST monotonic): this consumer just handed a job
        back for another worker, which must get the chance to claim it first."""
        until = asyncio.get_running_loop().time() + seconds
        if self.held_until is None or until > self.held_until:
            self.held_until = until

    def holding(self) -> bool:
        """Whether a ``hold`` is under way (an ack flush claims nothing then either)."""
        return (self.held_until is not None
                and asyncio.get_running_loop().time() < self.held_until)

    def count(self, job: Job, task: str | None, outcome: int, ran_s: float) -> None:
        """Count a settled run of ``task`` (a named route) under ``outcome`` (task metrics
        on), with its handler time (HOST monotonic s)."""
        tallies = self.tallies
        tally = tallies.get(job.queue) if tallies else None
        if tally is not None and task is not None:
            tally.add(task, outcome, ran_s)

    def member_ended(self, job: Job, outcome: str) -> None:
        """``job``'s end landed (``completed``, ``dead``, ``cancelled``): its batch, if it
        has one, hears of it (``runtime.batching``)."""
        self.batches.ended(job.queue, job.id, job.payload, outcome)

    def emit(self, kind: str, job: Job, **info: Any) -> None:
        """Hand ``job``'s event ``kind`` to the observer, if there is one."""
        emit(self.on_event, kind, job.queue, job.id, job.token, info)
