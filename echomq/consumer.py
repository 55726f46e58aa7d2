"""The Consumer: one queue's beat loop on an ``AsyncConnector``.

Theory of operation. A beat is the seed's order: the recovery leg (``reap`` expired leases),
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
function in a thread pool. Success acks (the row is deleted unless the retention keeps
completed rows); an exception retries after the route's fixed ``retry_delay_ms`` (the
seed's 1000 ms) or its ``backoff`` policy priced by ``backoff.delay_ms(policy, attempts)``,
handed to ``jobs.retry`` as a number, and dead-letters at ``max_attempts``; raising
``Delay`` (or calling ``job.delay(...)``) sends the job back to the schedule without a
failure and without spending an attempt (claims that followed a delay are counted on the
row as ``delays`` and left out of both the backoff index and the budget); raising
``RateLimited(ms)`` (``job.rate_limited(ms)``) hands the job back to the front of its lane
(or pending) with its attempt given back, and its group (or the queue) claims nothing for
``ms``: the reopen is a due instant ``jobs.next_due_ms`` reports, so the beat wakes for
it instead of polling. While a
handler runs, a checkpoint (``echomq.leases``) extends its lease every third of the lease,
so a long job is never reaped while its worker lives; the same checkpoint reports a cancel
request, which cancels an ``async`` handler's task and raises ``job.cancelled`` for a
plain function, and the job ends with ``finish_cancelled``. A route's ``timeout_ms`` (or the
consumer's default) bounds a handler (``echomq.runner``): an ``async`` one is
cancelled, a plain function abandoned in its thread (its pool is replaced, so the slot is
free at once); the attempt fails with a ``TimeoutError`` text. A route's
``keep_result_ms`` makes the ack store the JSON return value (``echomq.results``).

Degraded mode: a ``WireError`` on any leg does not end the loop. It sleeps
``backoff.delay_ms(("exponential", beat_ms, max(30_000, beat_ms)), streak)`` where streak
counts consecutive degraded beats, logs, and resumes when the server answers. An outcome
(ack, retry, delay) that hits a wire error is retried until the lease would have lapsed;
after that the reaper owns the job.

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
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import _guards as guard
from . import backoff, errors, jobs, keyspace, metrics
from ._time import to_epoch_ms, to_ms
from .beat import (
    DEFAULT_BATCH,
    DEFAULT_BEAT_MS,
    LegCounts,
    Legs,
    degraded_ms,
    promote_due,
    run_legs,
    wake_delay,
)
from .events import Event, emit
from .handler import Delay, Job, RateLimited, current_job
from .leases import Checkpoints, Held, tick_for
from .retention import Retention
from .retention import resolve as resolve_retention
from .runner import Runner

log = logging.getLogger("echomq.consumer")

DEFAULT_CONCURRENCY = 10
DEFAULT_LEASE_MS = 30_000
DEFAULT_RETRY_DELAY_MS = 1_000
DEFAULT_MAX_ATTEMPTS = 25
MAX_ERROR_CHARS = 2_000
KICK_SLACK_S = 0.1

# re-exported: handlers and the acceptance tests import these from here
__all__ = ["Consumer", "ConsumerStats", "Delay", "Event", "Job", "RateLimited", "Route",
           "current_job", "to_epoch_ms", "to_ms"]

@dataclass(frozen=True, slots=True)
class Route:
    """How to run one job: the handler and its retry and lease settings."""

    handler: Callable[[Job], Any]
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: backoff.Policy | None = None
    retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS
    lease_ms: int | None = None
    timeout_ms: int | None = None  # None: the consumer's default (off unless set)
    keep_result_ms: int | None = None  # keep the JSON return value this long
    name: str | None = None  # the task's name, for logs and the started event

    def retry_delay(self, attempts: int) -> int:
        """The delay before the next run after failed attempt number ``attempts``."""
        if self.backoff is not None:
            return backoff.delay_ms(self.backoff, max(1, attempts))
        return self.retry_delay_ms


@dataclass(slots=True)
class ConsumerStats:
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    delayed: int = 0
    rate_limited: int = 0
    cancelled: int = 0
    timed_out: int = 0
    abandoned: int = 0  # plain-function handlers left running in their thread at a timeout
    lost: int = 0
    # a refused outcome whose own earlier try had landed (its reply lost, e.g. in a
    # restart): not lost, and counted in completed/retried/... as well when known
    already_settled: int = 0
    reaped: int = 0
    promoted: int = 0
    degraded_sleeps: list[int] = field(default_factory=list)


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
    retries by policy.
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
    ) -> None:
        keyspace.validate_queue(queue)
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
        self.legs = Legs(reap_batch, promote_batch, max_stalled, self.retention)
        self.on_event = on_event
        self.stats = ConsumerStats()
        self.meter = metrics.Meter()  # durations etc., folded into the server's metrics
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self._runner = Runner(concurrency, executor, self.stats)
        self._leases = Checkpoints(conn, queue, beat_ms, tick_for(beat_ms, lease_ms),
                                   self._runner.cancel_requested)
        self._runner.held = self._leases.held
        self._checkpointer: asyncio.Task[None] | None = None
        self._running = False
        self._beat_no = 0
        self._acks: list[tuple[tuple[Any, ...], asyncio.Future[errors.ServerError | None]]] = []
        self._ack_flush: asyncio.Task[None] | None = None
        # slots promised to a claim in flight (the claim loop's or one riding an ack flush),
        # so the two never claim the same free slot twice
        self._reserved = 0
        self._slot = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._streak = 0
        self._degrading: asyncio.Event | None = None
        self._wake_key = keyspace.queue_key(queue, "wake")
        self._due_key = keyspace.queue_key(queue, "due")
        # a run-at now leads the schedule (a due token): the legs re-plan their wake
        self._led = asyncio.Event()
        #: pooled: who re-plans for a due token (the worker sets its Metronome's ``lead``);
        #: with none, a pooled consumer leaves the due list alone
        self.on_lead: Callable[[str], None] | None = None
        self._due_at: float | None = None  # the next noted due instant (loop clock)
        self._idle_until: float | None = None  # when the claim loop's wait ends, if waiting
        self._kick = asyncio.Event()
        self.abandoned: list[str] = []  # ids the last drain left to the reaper

    # -- the beat ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Beat until ``stop`` is set, then return without waiting for in-flight jobs
        (``drain`` waits for them). Claims stop the moment ``stop`` is set."""
        self._stop = stop
        self._streak = 0
        self._degrading = None
        legs = None if self.pooled else asyncio.ensure_future(self._legs(stop))
        self._running = True
        self._ensure_checkpointer()
        try:
            await self._claims(stop)
        finally:
            self._running = False
            if self.meter.durations:
                await self.meter.flush(self.conn, self.queue, self._streak)
            if legs is not None:
                legs.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await legs

    async def beat(self) -> int:
        """One beat by hand, in the seed's order: the recovery leg (reap) and promote
        (skipped when pooled), then claims up to the free concurrency; the claimed jobs
        start running in the background. Returns how many were claimed. ``run`` is this
        on a timer, with the blocking wake in between."""
        if not self.pooled:
            self._beat_no += 1
            counts = await run_legs(self.conn, self.queue, self.legs, self._beat_no)
            self.stats.reaped += counts.reaped
            self.stats.promoted += counts.promoted
        free = self.concurrency - len(self.inflight)
        if free <= 0:
            return 0
        claims = await jobs.claim_many(self.conn, self.queue, self.lease_ms, free)
        for claim in claims:
            self._start(claim)
        return len(claims)

    async def _legs(self, stop: asyncio.Event) -> None:
        """The recovery leg and promote, once a beat on the HOST monotonic clock.

        They run beside the claim loop rather than inside it: a server's blocking-command
        timeouts are only as fine as its cron (100 ms at the default hz), so a beat paced
        by BLPOP timeouts would drift to two. Promote and reap push a wake token, so work
        they release wakes the claim loop at once. Between beats the loop also wakes at the
        next scheduled run-at (read on the SERVER clock after each promote) and promotes
        then, so a scheduled job starts within a few ms of its run-at, not a beat later.
        """
        loop = asyncio.get_running_loop()
        beat_s = self.beat_ms / 1000
        next_at = loop.time()
        due_wake = False
        while not stop.is_set():
            try:
                if due_wake:  # a run-at fell between beats: promote only, right now
                    counts = await promote_due(self.conn, self.queue, self.legs, LegCounts())
                else:
                    self._beat_no += 1
                    began = time.monotonic()
                    counts = await run_legs(self.conn, self.queue, self.legs, self._beat_no)
                    self.meter.beat_s = time.monotonic() - began
            except (errors.WireError, errors.CommandError) as exc:
                await self._degraded(exc)
                next_at, due_wake = loop.time(), False
                continue
            self._healthy()
            self.stats.reaped += counts.reaped
            self.stats.promoted += counts.promoted
            self.note_due(counts.next_due_ms)
            if not due_wake:
                next_at += beat_s
                if next_at < loop.time():  # a slow beat: do not catch up with a burst
                    next_at = loop.time()
            delay, due_wake = wake_delay(next_at - loop.time(), counts.next_due_ms)
            try:
                due_wake = await self._sleep_replanning(next_at, delay, due_wake)
            except (errors.WireError, errors.CommandError) as exc:
                await self._degraded(exc)
                next_at, due_wake = loop.time(), False

    async def _sleep_replanning(self, next_at: float, delay: float, due_wake: bool) -> bool:
        """Sleep ``delay`` (HOST monotonic) toward the beat at ``next_at`` (loop clock), or
        less: a due token (a new run-at leads the schedule) cuts the sleep short to re-read
        the head (``jobs.next_due_ms``, SERVER clock) and re-plan it. One read per new head,
        none per idle beat. Returns whether the wake is for a due run-at."""
        loop = asyncio.get_running_loop()
        while await self._sleep_unless_led(delay):
            ms = await jobs.next_due_ms(self.conn, self.queue)
            self.note_due(ms)
            delay, due_wake = wake_delay(next_at - loop.time(), ms)
        return due_wake

    async def _sleep_unless_led(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until stop; True (and the signal consumed) when a due token
        came first."""
        assert self._stop is not None
        if not self._led.is_set() and seconds > 0:
            waits = {asyncio.ensure_future(self._stop.wait()),
                     asyncio.ensure_future(self._led.wait())}
            _done, pending = await asyncio.wait(waits, timeout=seconds,
                                                return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
        if self._led.is_set() and not self._stop.is_set():
            self._led.clear()
            return True
        return False

    async def _claims(self, stop: asyncio.Event) -> None:
        beat_s = self.beat_ms / 1000
        led = False
        while not stop.is_set():
            try:
                if self.meter.due():  # at most once a second, busy or idle, in the background
                    self.meter.flush_soon(self.conn, self.queue, self._streak)
                free = self._free()
                got = 0
                # a due token says a run-at leads the schedule, not that a job is ready:
                # no claim for it, straight back to the wait
                if free > 0 and not led:
                    self._reserved += free
                    try:
                        claims = await jobs.claim_many(
                            self.conn, self.queue, self.lease_ms, free)
                    finally:
                        self._reserved -= free
                    for claim in claims:
                        self._start(claim)
                    got = len(claims)
                    self._healthy()
                led = False
                if free <= 0:
                    await self._wait_slot(beat_s)
                elif got < free:
                    led = await self._idle(self._idle_for(beat_s))
            except (errors.WireError, errors.CommandError) as exc:
                # CommandError too: a server that is loading, read-only after a failover or
                # out of memory answers with an error reply, and that is weather as well
                await self._degraded(exc)

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
        at = asyncio.get_running_loop().time() + max(ms, 0) / 1000
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

    def _free(self) -> int:
        """Slots neither running nor promised to a claim in flight."""
        return self.concurrency - len(self.inflight) - self._reserved

    async def _degraded(self, exc: Exception) -> None:
        """One degraded beat: sleep on the exponential curve over the beat, indexed by the
        streak. Both loops report here; while one sleeps, the other waits for that sleep
        instead of adding its own, so the streak counts beats, not failed calls."""
        if self._degrading is not None:
            await self._degrading.wait()
            return
        self._degrading = asyncio.Event()
        try:
            self._streak += 1
            ms = degraded_ms(self.beat_ms, self._streak)
            self.stats.degraded_sleeps.append(ms)
            log.warning("consumer %s degraded (streak %d, sleeping %d ms): %s",
                        self.queue, self._streak, ms, exc)
            self._emit("degraded", None, 0, streak=self._streak, sleep_ms=ms, error=str(exc))
            await self._sleep(ms / 1000)
        finally:
            done, self._degrading = self._degrading, None
            done.set()

    def _healthy(self) -> None:
        if self._streak:
            log.warning("consumer %s recovered after %d degraded beats", self.queue,
                        self._streak)
            self._emit("recovered", None, 0, streak=self._streak)
            self._streak = 0

    async def _idle(self, timeout: float) -> bool:
        """Block on the wake list for up to ``timeout`` s (no hot polling), or until stop.
        The due list too, unless pooled with no ``on_lead``: True when a due token came,
        which is handed to the legs (or ``on_lead``) to re-plan their wake."""
        # BLPOP's timeout is in seconds (a double); 0 would mean forever.
        secs = max(timeout, 0.005)
        assert self._stop is not None
        self._kick.clear()
        self._idle_until = asyncio.get_running_loop().time() + secs
        keys = ((self._wake_key,) if self.pooled and self.on_lead is None
                else (self._wake_key, self._due_key))
        pop = asyncio.ensure_future(self.conn.call("BLPOP", *keys, f"{secs:.3f}"))
        stopper = asyncio.ensure_future(self._stop.wait())
        kicked = asyncio.ensure_future(self._kick.wait())
        try:
            await asyncio.wait({pop, stopper, kicked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._idle_until = None
            stopper.cancel()
            kicked.cancel()
            if not pop.done():
                pop.cancel()
                with contextlib.suppress(asyncio.CancelledError, errors.EchoMQError):
                    await pop
        if not pop.done() or pop.cancelled():
            return False
        got = pop.result()  # a wire error surfaces here and degrades the beat
        if not got or _text(got[0]) != self._due_key:
            return False
        if not self.pooled:
            self._led.set()
        elif self.on_lead is not None:
            self.on_lead(self.queue)
        return True

    async def _wait_slot(self, timeout: float) -> None:
        self._slot.clear()
        if self._free() > 0:
            return
        assert self._stop is not None
        waits = {asyncio.ensure_future(self._slot.wait()), asyncio.ensure_future(self._stop.wait())}
        _done, pending = await asyncio.wait(waits, timeout=max(timeout, 0.001),
                                            return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()

    async def _sleep(self, seconds: float) -> None:
        assert self._stop is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    # -- a job in hand -------------------------------------------------------------------

    def _start(self, claim: jobs.Claim) -> None:
        self.stats.claimed += 1
        job = Job(self.queue, claim.id, claim.token, claim.payload, self.conn,
                  asyncio.get_running_loop())
        task = asyncio.ensure_future(self._process(job))
        self.inflight[claim.id] = task

        def done(_: asyncio.Task[None]) -> None:
            self.inflight.pop(claim.id, None)
            self._slot.set()

        task.add_done_callback(done)
        self._ensure_checkpointer()

    async def _process(self, job: Job) -> None:
        route: Route | None = None
        try:
            route = self.router(job)
        except Exception as exc:
            outcome: tuple[str, Any] = ("fail", exc)
        self._emit("started", job.id, job.token, task=route.name if route else None)
        # the claim priced the lease at self.lease_ms; the first checkpoint comes a third
        # of the way into the shorter of that and the route's lease
        lease_ms = (route.lease_ms if route and route.lease_ms else None) or self.lease_ms
        held = Held(job, lease_ms, min(lease_ms, self.lease_ms), self._leases.tick)
        if route is not None:
            started = time.monotonic()
            outcome = await self._runner.run(route.handler, job, held,
                                             route.timeout_ms or self.timeout_ms,
                                             route.keep_result_ms is not None)
        # a job no route fits (an unknown task, a payload that is not a task's) fails the
        # same way on every attempt: dead-letter it at once instead of retrying it 25 times
        await self._settle(job, route or Route(_no_handler, max_attempts=1), outcome, held)
        if route is not None:
            self.meter.handled(time.monotonic() - started, outcome[0] != "fail")

    def _ensure_checkpointer(self) -> None:
        if self._checkpointer is None or self._checkpointer.done():
            self._checkpointer = asyncio.ensure_future(
                self._leases.run(lambda: self._running or bool(self.inflight)))

    async def _ack(self, job: Job, result: str | None = None,
                   keep_result_ms: int | None = None) -> None:
        """Queue ``job``'s ack for the next pipelined ``ack_many`` and wait for its slot:
        jobs finishing in the same loop turn share one round trip. With ``result`` the
        ack stores it for ``keep_result_ms``."""
        fut: asyncio.Future[errors.ServerError | None] = (
            asyncio.get_running_loop().create_future())
        held: tuple[Any, ...] = ((job.id, job.token) if result is None else
                                 (job.id, job.token, result, keep_result_ms))
        self._acks.append((held, fut))
        if self._ack_flush is None or self._ack_flush.done():
            self._ack_flush = asyncio.ensure_future(self._flush_acks())
        refused = await fut
        if refused is not None:
            raise refused

    async def _flush_acks(self) -> None:
        await asyncio.sleep(0)  # let the handlers finishing in this turn join the batch
        while self._acks:
            batch, self._acks = self._acks, []
            # the slots these acks free (and any idle ones) are refilled in the same round
            # trip: ack_many and claim_many pipelined, each its own atomic transition
            want = 0
            if self._running and not (self._stop is not None and self._stop.is_set()):
                want = max(0, self._free() + len(batch))
            self._reserved += want
            try:
                replies, claims = await (jobs.ack_and_claim(
                    self.conn, self.queue, [held for held, _ in batch],
                    self.lease_ms, want, keep=self.retention.keeps_completed))
            except Exception as exc:
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            finally:
                self._reserved -= want
            for (_, fut), reply in zip(batch, replies, strict=True):
                if not fut.done():
                    fut.set_result(reply)
            for claim in claims:
                self._start(claim)

    async def _settle(self, job: Job, route: Route, outcome: tuple[str, Any],
                      deadline: Held) -> None:
        kind, value = outcome
        priced: dict[str, int] = {}
        keep_ms = route.keep_result_ms
        if kind == "ok":
            try:  # the hot path: no closure, no row key, one shared ack round trip
                await self._ack(job, value, keep_ms)
            except errors.EchoMQError:
                pass  # a refusal or a wire error: the patient loop below settles it
            else:
                self.stats.completed += 1
                self._emit("completed", job.id, job.token)
                return
        if kind == "timeout":
            self.stats.timed_out += 1
            self._emit("timed_out", job.id, job.token, error=f"TimeoutError: {value}")
        if kind == "ok":
            verb: Callable[[], Awaitable[Any]] = lambda: self._ack(job, value, keep_ms)  # noqa: E731
        elif kind == "cancelled":
            verb = lambda: jobs.finish_cancelled(  # noqa: E731
                self.conn, self.queue, job.id, job.token)
        elif kind == "rate_limited":
            # back to the front of its lane (or pending) with its attempt given back; its
            # group (or the queue) is blocked for the span, on the SERVER clock
            verb = lambda: jobs.rate_limited(  # noqa: E731
                self.conn, self.queue, job.id, job.token, value.ms)
        elif kind == "delay":
            async def verb() -> Any:
                try:
                    await jobs.delay(self.conn, self.queue, job.id, job.token, value.value,
                                     value.mode)
                except errors.StateError:  # wire 6: EMQ.DELAY refuses a grouped row
                    await jobs.delay(self.conn, self.queue, job.id, job.token, value.value,
                                     value.mode, native=False)
                # the seed's delay leaves attempts alone and the next claim increments it;
                # counting delays on the row keeps them out of the retry budget (as Oban's
                # snooze does), so a delay never spends an attempt
                with contextlib.suppress(errors.EchoMQError):
                    await jobs.count_delay(self.conn, self.queue, job.id)
        else:
            err = f"{type(value).__name__}: {value}"[:MAX_ERROR_CHARS]

            async def verb() -> Any:
                delays = await jobs.delays(self.conn, self.queue, job.id)
                tried = max(1, job.token - delays)  # claims that were not after a delay
                priced.update(delay_ms=route.retry_delay(tried), tried=tried)
                return await (jobs.retry(self.conn, self.queue, job.id, job.token,
                                           priced["delay_ms"], route.max_attempts + delays,
                                           err))
        pause = self.beat_ms / 1000
        while True:
            try:
                result = await verb()
                break
            except (errors.WireError, errors.Unavailable) as exc:
                # Unavailable too: a restarted server answers LOADING, a full one OOM, a
                # demoted one READONLY, and each wrote nothing: the same weather
                if deadline.lapsed():
                    log.warning("job %s: outcome %s not recorded before its lease lapsed "
                                "(%s); the reaper will return it", job.id, kind, exc)
                    self.stats.lost += 1
                    self._emit("lost", job.id, job.token, outcome=kind)
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
            except errors.ServerError as exc:
                if await self._landed_before(job, kind, exc):
                    return
                log.warning("job %s: %s refused (%s); another holder owns it now",
                            job.id, kind, exc)
                self.stats.lost += 1
                self._emit("lost", job.id, job.token, outcome=kind, error=str(exc))
                return
        if kind == "ok":
            self.stats.completed += 1
            self._emit("completed", job.id, job.token)
        elif kind == "rate_limited":
            self.stats.rate_limited += 1
            # its group (or the queue) reopens then, with no wake token: claim again then
            self.note_due(value.ms, kick=True)
            self._emit("rate_limited", job.id, job.token, ms=value.ms)
        elif kind == "delay":
            self.stats.delayed += 1
            self._emit("delayed", job.id, job.token, mode=value.mode, value=value.value)
        elif kind == "cancelled" or result == "cancelled":
            # a failure of a cancel-marked row ends it cancelled too (retry's CANCELLED)
            self.stats.cancelled += 1
            self._emit("cancelled", job.id, job.token)
        elif result == "dead":
            self.stats.dead += 1
            log.error("job %s dead after %d attempts: %s: %s", job.id, priced["tried"],
                      type(value).__name__, value)
            self._emit("dead", job.id, job.token, tried=priced["tried"],
                       error=f"{type(value).__name__}: {value}")
        else:
            self.stats.retried += 1
            log.warning("job %s failed (attempt %d), retry in %d ms: %s: %s", job.id,
                        priced["tried"], priced["delay_ms"], type(value).__name__, value)
            self._emit("retrying", job.id, job.token, delay_ms=priced["delay_ms"],
                       tried=priced["tried"], error=f"{type(value).__name__}: {value}")

    async def _landed_before(self, job: Job, kind: str, exc: errors.ServerError) -> bool:
        """True (and counted) when a refused outcome only found its own earlier try: the
        row is gone or settled at this job's token (see ``jobs.fate``)."""
        try:
            fate = await jobs.fate(self.conn, self.queue, job.id, job.token)
        except errors.EchoMQError:
            return False
        if fate == "moved":
            return False
        self.stats.already_settled += 1
        if kind == "ok":
            self.stats.completed += 1
        log.info("job %s: %s already settled (%s; row %s at token %d): an earlier try "
                 "landed", job.id, kind, exc, fate, job.token)
        self._emit("settled", job.id, job.token, outcome=kind, fate=fate, error=str(exc))
        return True

    def _emit(self, kind: str, job_id: str | None, attempts: int, **info: Any) -> None:
        emit(self.on_event, kind, self.queue, job_id, attempts, info)

    # -- shutdown ------------------------------------------------------------------------

    async def drain(self, grace_s: float) -> int:
        """Wait up to ``grace_s`` for in-flight jobs to settle; cancel the rest (their
        leases lapse and the reaper returns them). Returns how many were left unfinished."""
        pending = list(self.inflight.values())
        if pending:
            _done, left = await asyncio.wait(pending, timeout=grace_s)
        else:
            left = set()
        # named before the cancel, whose done-callbacks drop them from inflight
        self.abandoned = [jid for jid, task in self.inflight.items() if task in left]
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=1.0)
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            self._checkpointer = None
        self._runner.shutdown()
        return len(left)

    async def serve(self, stop: asyncio.Event, grace_s: float = 30.0) -> int:
        """``run`` until ``stop``, then ``drain`` within ``grace_s``; the unfinished count."""
        await self.run(stop)
        return await self.drain(grace_s)


_validate_policy = backoff.validate  # reachable where a ``backoff=`` parameter shadows it


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _no_handler(job: Job) -> None:  # pragma: no cover - never called
    raise LookupError(f"no handler for job {job.id}")
