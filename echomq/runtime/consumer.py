"""The Consumer: one queue's beat loop on an ``AsyncConnector``.

Theory of operation. A beat runs its legs in one order: the recovery leg (``reap`` expired leases),
then ``promote`` (due scheduled jobs), then the claims, up to the free concurrency, in one
``claim_many`` call. In pool mode (``pooled=True``) a Metronome runs the first two legs
once a beat for the queue and the consumer only claims. Between beats an idle consumer does
not poll: it blocks on the queue's wake list (``BLPOP emq:{q}:wake``, timeout one beat),
which enqueue, promote and reap push a token onto, so an enqueued job starts within a round
trip and a scheduled one within a few ms of its run-at: the legs wake at the earliest run-at
they read, and an admission whose run-at leads the schedule (comes before that instant)
leaves a token on ``emq:{q}:due``, which the idle claim loop pops beside its wake list
(one ``BLPOP`` on both) and hands to the legs (or, pooled, to ``on_lead``: the worker's
Metronome), which re-read the head and re-plan their wake.

Every claimed job runs as its own task: an ``async def`` handler on the loop, a plain
function in a thread pool (``echomq.runtime.runner``). Its outcome (``runtime.outcome``) is
settled by ``echomq.runtime.settling`` (acks batched, retries priced, delays, rate limits,
cancels); the claim loop and its degraded mode are ``runtime.claimloop``, a lone
consumer's legs ``runtime.legloop``; all three share the consumer's ``runtime.context``.
While a handler runs, a checkpoint (``echomq.runtime.leases``) extends its lease every
third of the lease, so a long job is never reaped while its worker lives; the same
checkpoint reports a cancel request, which cancels an ``async`` handler's task and raises
``job.cancelled`` for a plain function, and the job ends with ``finish_cancelled``. A
route's ``timeout_ms`` (or the consumer's default) bounds a handler: an ``async`` one is
cancelled, a plain function abandoned in its thread (its pool is replaced, so the slot is
free at once); the attempt fails with a ``TimeoutError`` text. A route's
``keep_result_ms`` makes the ack store the JSON return value
(``echomq.verbs.results``).

A partitioned queue (``mail#0`` ... ``mail#7``) is served by one consumer given its
``partitions``: one slot pool, one claim loop and one ack batcher for all of them. The
partitions that have work take turns (``runtime.spread``), each job is settled on the
partition it came from, and the legs (lone mode) run for every partition.

Guarantee: at least once. A job whose worker dies, or whose ack never lands, is returned
by the reaper after its lease and runs again; a handler with an external effect dedups on
the job id.

Clocks: leases, run-ats, promote and reap read the SERVER clock (in the scripts); the beat,
the checkpoint cadence and the degraded sleeps are paced on the HOST monotonic clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from echomq.core import backoff, keyspace
from echomq.core import guards as guard
from echomq.runtime.beat import DEFAULT_BATCH, DEFAULT_BEAT_MS, Legs
from echomq.runtime.chunking import ChunkHandler, ChunkPath
from echomq.runtime.claimloop import ClaimLoop
from echomq.runtime.context import Context
from echomq.runtime.events import Event, emit
from echomq.runtime.handler import Delay, Job
from echomq.runtime.leases import Checkpoints, Held, tick_for
from echomq.runtime.legloop import LegLoop
from echomq.runtime.meter import Meter
from echomq.runtime.outcome import Completed, Delayed, Failed, Outcome
from echomq.runtime.route import (
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY_MS,
    Route,
    UnknownTask,
    no_handler,
    task_name,
)
from echomq.runtime.runner import Runner
from echomq.runtime.settling import Settler
from echomq.runtime.slots import Slots
from echomq.runtime.stats import ConsumerStats
from echomq.runtime.taskstats import TaskTally
from echomq.runtime.waker import Waker
from echomq.runtime.weather import Weather
from echomq.verbs import jobs
from echomq.verbs.retention import Retention
from echomq.verbs.retention import resolve as resolve_retention

DEFAULT_CONCURRENCY = 10
#: a job handed back to another worker is remembered this long (s), up to this many ids
HANDED_FOR_S = 10.0
HANDED_MAX = 1000


class Consumer:
    """Claims and runs ``queue``'s jobs on ``conn`` (an ``AsyncConnector``).

    Pass ``handler`` (called with a ``Job``; async or sync) with the retry settings, or a
    ``router`` that picks a ``Route`` per job. Completed rows are deleted by their ack
    unless ``keep_completed`` (a count) / ``keep_completed_for`` (ms or ``timedelta``) or a
    ``retention`` keeps them. ``pooled=True`` skips the recovery and
    promote legs (a Metronome runs them). ``timeout_ms`` is the default handler timeout
    for routes without their own (off when ``None``): an ``async`` handler is cancelled at
    its deadline; a plain function is abandoned in its thread (it cannot be interrupted)
    and its slot freed. Either way the attempt fails with a ``TimeoutError`` text and
    retries by policy. ``task_metrics=True`` counts each run of a named route (a task)
    by outcome and run time in memory and flushes the counts to the server about once a
    second (``echomq.runtime.taskstats``, read with ``verbs.taskmetrics``). ``partitions``
    (the queues of a partitioned queue, ``mail#0`` ...): serve them all with one pool of
    ``concurrency`` slots; ``queue`` (the logical name, ``mail``) then only names the
    consumer (metrics and task counts go to each job's partition). ``chunks`` (task name
    -> ``ChunkHandler``): those tasks' jobs run a chunk at a time (``runtime.chunking``).
    """

    def __init__(
        self,
        conn: Any,
        queue: str,
        handler: Callable[[Job], Any] | None = None,
        *,
        router: Callable[[Job], Route] | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        beat_ms: int = DEFAULT_BEAT_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: backoff.Policy | None = None,
        retention: Retention | None = None,
        keep_completed: int | None = None,
        keep_completed_for: int | dt.timedelta | None = None,
        pooled: bool = False,
        reap_batch: int = DEFAULT_BATCH,
        promote_batch: int = DEFAULT_BATCH,
        max_stalled: int = jobs.DEFAULT_MAX_STALLED,
        on_event: Callable[[Event], None] | None = None,
        executor: ThreadPoolExecutor | None = None,
        timeout_ms: int | None = None,
        weather: Weather | None = None,
        on_unknown: Callable[[Job, str], Awaitable[int | None]] | None = None,
        task_metrics: bool = False,
        partitions: Sequence[str] | None = None,
        chunks: Mapping[str, ChunkHandler] | None = None,
    ) -> None:
        keyspace.validate_queue(queue)
        queues = list(dict.fromkeys(partitions)) if partitions else [queue]
        for q in queues:
            keyspace.validate_queue(q)
        if (handler is None) == (router is None):
            raise TypeError("Consumer takes a handler or a router, exactly one")
        guard.positive("concurrency", concurrency)
        guard.span("beat_ms", beat_ms, minimum=1)
        guard.span("lease_ms", lease_ms, minimum=1)
        guard.span("retry_delay_ms", retry_delay_ms)
        guard.positive("max_attempts", max_attempts)
        if timeout_ms is not None:
            guard.positive("timeout_ms", timeout_ms)
        if backoff is not None:
            _validate_policy(backoff)
        self.conn = conn
        self.queue = queue
        if router is None:
            assert handler is not None
            route = Route(handler, max_attempts, backoff, retry_delay_ms, timeout_ms=timeout_ms)
            router = lambda _job: route  # noqa: E731
        self.router = router
        self.concurrency = concurrency
        self.beat_ms = beat_ms
        self.lease_ms = lease_ms
        self.timeout_ms = timeout_ms
        self.retention = resolve_retention(retention, keep_completed, keep_completed_for)
        self.pooled = pooled
        self.on_event = on_event
        #: where an outage is logged, once per outage (a worker shares one among its loops)
        self.weather = weather if weather is not None else Weather(f"consumer {queue}")
        #: asked about a job whose task the router does not know (``UnknownTask``): the ms
        #: to send it back after (another live worker serves the task), or None (dead)
        self.on_unknown = on_unknown
        self._handed: dict[str, float] = {}  # job id -> when it was handed back (HOST)
        self._leases = Checkpoints(conn, queue, beat_ms, tick_for(beat_ms, lease_ms),
                                   self.weather)
        #: what the claim loop, the settler and the legs share
        self.ctx = ctx = Context(
            conn, queue, queues, concurrency=concurrency, lease_ms=lease_ms,
            beat_ms=beat_ms, pooled=pooled, retention=self.retention, on_event=on_event,
            weather=self.weather, checkpoints=self._leases, task_metrics=task_metrics,
            process=self._process)
        if chunks:  # chunk tasks' jobs: one handler call and one ack per chunk
            ctx.chunks = ChunkPath(ctx, chunks)
        self.claims = ClaimLoop(ctx)
        self.settler = Settler(ctx)
        self.legs = LegLoop(ctx, Legs(reap_batch, promote_batch, max_stalled, self.retention),
                            self.claims)
        self._runner = Runner(concurrency, executor, ctx.stats, self._leases.held)
        self.abandoned: list[str] = []  # ids the last drain left to the reaper

    @property
    def queues(self) -> list[str]:
        """The queues this consumer claims from: its partitions, or the queue itself."""
        return self.ctx.queues

    @property
    def stats(self) -> ConsumerStats:
        """This consumer's counters (claimed, completed, retried, dead, ...)."""
        return self.ctx.stats

    @property
    def slots(self) -> Slots:
        """The concurrency slots: how many jobs may run at once and which run now."""
        return self.ctx.slots

    @property
    def meters(self) -> dict[str, Meter]:
        """Durations etc. by queue, folded into each queue's server-side metrics."""
        return self.ctx.meters

    @property
    def tallies(self) -> dict[str, TaskTally]:
        """The per-task counts by queue (task metrics on), flushed to each queue."""
        return self.ctx.tallies

    @property
    def inflight(self) -> dict[str, asyncio.Task[None]]:
        """The tasks of the jobs in hand, by job id (a handler running, or a patient
        settlement)."""
        return self.ctx.slots.inflight

    @property
    def held(self) -> dict[str, Held]:
        """The jobs whose handlers run now, by job id (each ``Held`` names its task and
        when it started): what the worker publishes as its busy list."""
        return self._leases.held

    @property
    def on_lead(self) -> Callable[[str], None] | None:
        """Pooled: who re-plans for a due token this consumer pops (the worker sets its
        Metronome's ``lead``); with none, a pooled consumer leaves the due list alone."""
        return self.claims.on_lead

    @on_lead.setter
    def on_lead(self, lead: Callable[[str], None] | None) -> None:
        self.claims.on_lead = lead

    def wait_with(self, waker: Waker) -> None:
        """Pooled: idle under the worker's one wait (``runtime.waker``) instead of a
        ``BLPOP`` of this consumer's own each beat; its due tokens go to the waker's
        ``on_lead``."""
        slots = self.ctx.slots
        for q in self.queues:
            waker.join(q, self.claims.kick, lambda: slots.free() <= 0)
        self.claims.waker = waker

    def note_due(self, ms: int | None, *, kick: bool = False) -> None:
        """Something becomes claimable by time alone ``ms`` from now (SERVER clock): an
        idle claim loop wakes then (see ``Wake.note``)."""
        self.ctx.wake.note(ms, kick=kick)

    # -- the beat ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Beat until ``stop`` is set, then return without waiting for in-flight jobs
        (``drain`` waits for them). Claims stop the moment ``stop`` is set."""
        ctx = self.ctx
        ctx.stop = stop
        self.claims.arm()
        legs = None if self.pooled else asyncio.ensure_future(self.legs.run(stop))
        ctx.running = True
        self._leases.ensure(ctx.busy)
        watch = asyncio.ensure_future(self._watch(stop))
        try:
            await self.claims.run()
        finally:
            ctx.running = False
            watch.cancel()
            for q, meter in ctx.meters.items():
                if meter.durations:
                    await meter.flush(self.conn, q, self.claims.streak)
            for q, tally in ctx.tallies.items():
                if tally.pending:
                    await tally.final_flush(self.conn, q)
            if legs is not None:
                legs.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await legs

    async def _watch(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.ctx.slots.stopping()

    async def beat(self) -> int:
        """One beat by hand, in the beat's order: the recovery leg (reap) and promote
        (skipped when pooled), then claims up to the free concurrency; the claimed jobs
        start running in the background. Returns how many were claimed. ``run`` is this
        on a timer, with the blocking wake in between."""
        if not self.pooled:
            await self.legs.once()
        free = self.ctx.slots.free()
        if free <= 0:
            return 0
        return await self.claims.claim(free)

    async def _process(self, job: Job) -> None:
        settler = self.settler
        try:
            route: Route | None = None
            unknown: UnknownTask | None = None
            outcome: Outcome
            try:
                route = self.router(job)
            except UnknownTask as exc:
                # recorded as the LookupError it is (the row's error text names that)
                unknown, outcome = exc, Failed(LookupError(str(exc)))
            except Exception as exc:
                outcome = Failed(exc)
            name = route.name if route is not None else task_name(job.payload)
            if route is not None:  # what current_job() says of its job (a rerun's counts)
                job._task, job._max_attempts = name, route.max_attempts
                if job.token > 1:
                    await job.counted()
            if self.on_event is not None:
                emit(self.on_event, "started", job.queue, job.id, job.token, {"task": name})
            # the claim priced the lease at self.lease_ms; the first checkpoint comes a
            # third of the way into the shorter of that and the route's lease
            lease_ms = (route.lease_ms if route and route.lease_ms else None) or self.lease_ms
            held = Held(job, lease_ms, min(lease_ms, self.lease_ms), self._leases.tick,
                        name=name)
            if route is None:
                if unknown is not None and self.on_unknown is not None:
                    # another live worker's app serves this task here: back to it, with
                    # no attempt spent (the delay transition; the ask logs who serves it)
                    back_ms = await self.on_unknown(job, unknown.task)
                    if back_ms is not None:
                        self._hand_back(job.id, back_ms)
                        back = Delay(back_ms)
                        await settler.settle(job, Route(no_handler, name=name),
                                             Delayed(back.mode, back.value, handed_back=True),
                                             held)
                        return
                # a job no route fits (an unknown task, a payload that is not a task's)
                # fails the same way on every attempt: dead-letter it at once instead of
                # retrying it 25 times
                await settler.settle(job, Route(no_handler, max_attempts=1, name=name),
                                     outcome, held)
                return
            started = time.monotonic()
            outcome = await self._runner.run(route.handler, job, held,
                                             route.timeout_ms or self.timeout_ms,
                                             route.keep_result_ms is not None)
            ran_s = time.monotonic() - started
            self.ctx.meters[job.queue].handled(ran_s, type(outcome) is not Failed)
            if type(outcome) is Completed and route.after is None:
                # the hot path: the ack rides the next batch; the task ends (a task with
                # callbacks settles patiently, its callback in the job's slot)
                settler.queue_ack(job, route, outcome.result, held, ran_s)
                return
            await settler.settle(job, route, outcome, held, ran_s=ran_s)
        finally:
            self.ctx.ended(job.id)

    def _hand_back(self, job_id: str, back_ms: int) -> None:
        """A job goes back for another worker in ``back_ms``. The first time, as is: the
        serving worker claims it as often as this one does. A job this consumer handed
        back before and claimed again: claim nothing past its return, so the serving
        worker gets it then (HOST monotonic)."""
        now = time.monotonic()
        handed = self._handed
        if len(handed) > HANDED_MAX:
            for jid in [j for j, at in handed.items() if now - at > HANDED_FOR_S]:
                del handed[jid]
        if job_id in handed and now - handed[job_id] <= HANDED_FOR_S:
            self.ctx.hold((back_ms + self.beat_ms) / 1000)
        handed[job_id] = now

    # -- shutdown ------------------------------------------------------------------------

    async def drain(self, grace_s: float) -> int:
        """Wait up to ``grace_s`` for in-flight jobs to settle (their acks included); cancel
        the rest (their leases lapse and the reaper returns them). Returns how many were
        left unfinished."""
        loop = asyncio.get_running_loop()
        inflight = self.ctx.slots.inflight
        until = loop.time() + grace_s
        while True:  # a batched ack refused or lost starts a patient task: wait for it too
            pending = set(inflight.values())
            flush = self.settler.flushing
            if flush is not None and not flush.done():
                pending.add(flush)
            if not pending or loop.time() >= until:
                break
            await asyncio.wait(pending, timeout=until - loop.time())
        left = {task for task in inflight.values() if not task.done()}
        # named before the cancel, whose ends drop them from inflight; with them the jobs
        # whose ack never went out or never came back
        self.abandoned = [jid for jid, task in inflight.items() if task in left]
        self.abandoned += self.settler.unacked()
        flush = self.settler.flushing
        if flush is not None and not flush.done():
            flush.cancel()
            left.add(flush)
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=1.0)
        unfinished = len(self.abandoned)
        self.settler.forget()
        with contextlib.suppress(Exception):  # the batches hear of the ends that landed
            await asyncio.wait_for(self.ctx.batches.drain(), 2.0)
        for q, tally in self.tallies.items():  # the runs settled while draining
            await tally.final_flush(self.conn, q)
        self._leases.stop()
        self._runner.shutdown()
        return unfinished

    async def serve(self, stop: asyncio.Event, grace_s: float = 30.0) -> int:
        """``run`` until ``stop``, then ``drain`` within ``grace_s``; the unfinished count."""
        await self.run(stop)
        return await self.drain(grace_s)


_validate_policy = backoff.validate  # reachable where a ``backoff=`` parameter shadows it
