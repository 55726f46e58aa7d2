"""The Consumer: one queue's beat loop on an ``AsyncConnector``.

Theory of operation. A beat is the seed's order: the recovery leg (``reap`` expired leases),
then ``promote`` (due scheduled jobs), then the claims, up to the free concurrency, in one
``claim_many`` call. In pool mode (``pooled=True``) a Metronome runs the first two legs
once a beat for the queue and the consumer only claims. Between beats an idle consumer does
not poll: it blocks on the queue's wake list (``BLPOP emq:{q}:wake``, timeout one beat),
which enqueue, promote and reap push a token onto, so an enqueued job starts within a round
trip and a scheduled one within a beat of its run-at.

Every claimed job runs as its own task: an ``async def`` handler on the loop, a plain
function in a thread pool. Success acks (the row is deleted unless the retention keeps
completed rows); an exception retries after the route's fixed ``retry_delay_ms`` (the
seed's 1000 ms) or its ``backoff`` policy priced by ``backoff.delay_ms(policy, attempts)``,
handed to ``jobs.retry`` as a number, and dead-letters at ``max_attempts``; raising
``Delay`` (or calling ``job.delay(...)``) sends the job back to the schedule without a
failure and without spending an attempt (claims that followed a delay are counted on the
row as ``delays`` and left out of both the backoff index and the budget). While a
handler runs, a checkpoint extends its lease every third of the lease, so a long job is
never reaped while its worker lives.

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
import contextvars
import datetime as dt
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NoReturn

from . import _guards as guard
from . import backoff, errors, jobs, keyspace, metrics
from .metronome import (
    DEFAULT_BATCH,
    DEFAULT_BEAT_MS,
    LegCounts,
    Legs,
    promote_due,
    run_legs,
    wake_delay,
)
from .retention import Retention
from .retention import resolve as resolve_retention

log = logging.getLogger("echomq.consumer")

DEFAULT_CONCURRENCY = 10
DEFAULT_LEASE_MS = 30_000
DEFAULT_RETRY_DELAY_MS = 1_000
DEFAULT_MAX_ATTEMPTS = 25
MAX_ERROR_CHARS = 2_000

_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("echomq_job", default=None)


class Delay(Exception):
    """Raised by a handler to send its job back to the schedule without a failure.

    ``Delay(ms)`` runs it again ``ms`` after SERVER now; ``Delay(at=run_at_ms)`` at an
    absolute run-at (caller's clock); a ``timedelta`` / aware ``datetime`` works too.
    Attempts are untouched by the delay itself (the next claim increments them, as after
    any retry) and a delay never dead-letters; the consumer counts delays on the row
    (``delays``) and keeps them out of the retry budget, so a delay spends no attempt.
    """

    def __init__(self, ms: int | dt.timedelta | None = None, *,
                 at: int | dt.datetime | None = None) -> None:
        if (ms is None) == (at is None):
            raise TypeError("Delay takes a delay (ms or timedelta) or at=, exactly one")
        if at is not None:
            self.mode = "at"
            self.value = guard.instant("at", to_epoch_ms(at))
        else:
            assert ms is not None
            self.mode = "in"
            self.value = guard.span("ms", to_ms(ms))
        super().__init__(f"delay {self.mode} {self.value}")


def to_ms(value: int | dt.timedelta) -> int:
    """A duration in ms from an int (ms) or a ``timedelta``."""
    if isinstance(value, dt.timedelta):
        return int(value / dt.timedelta(milliseconds=1))
    return guard.integer("ms", value)


def to_epoch_ms(value: int | dt.datetime) -> int:
    """An absolute instant in epoch ms from an int or a ``datetime`` (naive = local time)."""
    if isinstance(value, dt.datetime):
        # exact integer arithmetic: a float timestamp rounds datetime.max past year 9999
        aware = value if value.tzinfo is not None else value.astimezone()
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    return guard.integer("at", value)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(slots=True)
class Job:
    """A job in hand: what a handler receives (and what ``current_job()`` returns)."""

    queue: str
    id: str
    token: int
    payload: bytes

    @property
    def attempts(self) -> int:
        """How many times this job has been claimed, this run included (the token)."""
        return self.token

    def delay(self, ms: int | dt.timedelta | None = None, *,
              at: int | dt.datetime | None = None) -> NoReturn:
        """Send this job back to the schedule (raises ``Delay``; the consumer does the rest)."""
        raise Delay(ms, at=at)


def current_job() -> Job | None:
    """The job the calling handler is running, or ``None`` outside a handler."""
    return _current.get()


@dataclass(frozen=True, slots=True)
class Route:
    """How to run one job: the handler and its retry and lease settings."""

    handler: Callable[[Job], Any]
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: backoff.Policy | None = None
    retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS
    lease_ms: int | None = None
    name: str | None = None  # the task's name, for logs and the started event

    def retry_delay(self, attempts: int) -> int:
        """The delay before the next run after failed attempt number ``attempts``."""
        if self.backoff is not None:
            return backoff.delay_ms(self.backoff, max(1, attempts))
        return self.retry_delay_ms


@dataclass(frozen=True, slots=True)
class Event:
    """A line of the consumer's timeline, for ``on_event`` (HOST wall-clock ``at``)."""

    kind: str  # started completed retrying dead delayed lost settled degraded recovered
    queue: str
    job_id: str | None
    attempts: int
    info: dict[str, Any]
    at: float


@dataclass(slots=True)
class ConsumerStats:
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    delayed: int = 0
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
    promote legs (a Metronome runs them).
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
    ) -> None:
        keyspace.validate_queue(queue)
        if (handler is None) == (router is None):
            raise TypeError("Consumer takes a handler or a router, exactly one")
        guard.positive("concurrency", concurrency)
        guard.span("beat_ms", beat_ms, minimum=1)
        guard.span("lease_ms", lease_ms, minimum=1)
        guard.span("retry_delay_ms", retry_delay_ms)
        guard.positive("max_attempts", max_attempts)
        if backoff is not None:
            _validate_policy(backoff)
        self.conn = conn
        self.queue = queue
        if router is None:
            assert handler is not None
            route = Route(handler, max_attempts, backoff, retry_delay_ms)
            router = lambda _job: route  # noqa: E731
        self.router = router
        self.concurrency = concurrency
        self.beat_ms = beat_ms
        self.lease_ms = lease_ms
        self.retention = resolve_retention(retention, keep_completed, keep_completed_for)
        self.pooled = pooled
        self.legs = Legs(reap_batch, promote_batch, max_stalled, self.retention)
        self.on_event = on_event
        self.stats = ConsumerStats()
        self.meter = metrics.Meter()  # durations etc., folded into the server's metrics
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self._held: dict[str, _Held] = {}
        self._checkpointer: asyncio.Task[None] | None = None
        self._running = False
        self._beat_no = 0
        self._acks: list[tuple[Job, asyncio.Future[errors.ServerError | None]]] = []
        self._ack_flush: asyncio.Task[None] | None = None
        # slots promised to a claim in flight (the claim loop's or one riding an ack flush),
        # so the two never claim the same free slot twice
        self._reserved = 0
        self._is_async: dict[Callable[[Job], Any], bool] = {}
        self._executor = executor
        self._own_executor = executor is None
        self._slot = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._streak = 0
        self._degrading: asyncio.Event | None = None
        self._wake_key = keyspace.queue_key(queue, "wake")
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
            if not due_wake:
                next_at += beat_s
                if next_at < loop.time():  # a slow beat: do not catch up with a burst
                    next_at = loop.time()
            delay, due_wake = wake_delay(next_at - loop.time(), counts.next_due_ms)
            await self._sleep(delay)

    async def _claims(self, stop: asyncio.Event) -> None:
        beat_s = self.beat_ms / 1000
        while not stop.is_set():
            try:
                if self.meter.due():  # at most once a second, busy or idle, in the background
                    self.meter.flush_soon(self.conn, self.queue, self._streak)
                free = self._free()
                got = 0
                if free > 0:
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
                if free <= 0:
                    await self._wait_slot(beat_s)
                elif got < free:
                    await self._idle(beat_s)
            except (errors.WireError, errors.CommandError) as exc:
                # CommandError too: a server that is loading, read-only after a failover or
                # out of memory answers with an error reply, and that is weather as well
                await self._degraded(exc)

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
            ms = backoff.delay_ms(("exponential", self.beat_ms, max(30_000, self.beat_ms)),
                                  self._streak)
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

    async def _idle(self, timeout: float) -> None:
        """Block on the wake list for up to ``timeout`` s (no hot polling), or until stop."""
        # BLPOP's timeout is in seconds (a double); 0 would mean forever.
        secs = max(timeout, 0.005)
        assert self._stop is not None
        pop = asyncio.ensure_future(self.conn.call("BLPOP", self._wake_key, f"{secs:.3f}"))
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({pop, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not pop.done():
                pop.cancel()
                with contextlib.suppress(asyncio.CancelledError, errors.EchoMQError):
                    await pop
        if pop.done() and not pop.cancelled():
            pop.result()  # a wire error surfaces here and degrades the beat

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
        job = Job(self.queue, claim.id, claim.token, claim.payload)
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
        held = _Held(job, lease_ms, min(lease_ms, self.lease_ms))
        if route is not None:
            self._held[job.id] = held
            started = time.monotonic()
            try:
                value = await self._call(route.handler, job)
            except Delay as d:
                outcome = ("delay", d)
            except Exception as exc:
                outcome = ("fail", exc)
            else:
                outcome = ("ok", value)
            finally:
                self._held.pop(job.id, None)
        # a job no route fits (an unknown task, a payload that is not a task's) fails the
        # same way on every attempt: dead-letter it at once instead of retrying it 25 times
        await self._settle(job, route or Route(_no_handler, max_attempts=1), outcome, held)
        if route is not None:
            self.meter.handled(time.monotonic() - started, outcome[0] != "fail")

    async def _call(self, handler: Callable[[Job], Any], job: Job) -> Any:
        token = _current.set(job)
        try:
            is_async = self._is_async.get(handler)
            if is_async is None:
                is_async = self._is_async[handler] = inspect.iscoroutinefunction(handler)
            if is_async:
                return await handler(job)
            ctx = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._pool(), ctx.run, handler, job)
            if inspect.isawaitable(result):
                return await result
            return result
        finally:
            _current.reset(token)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="echomq")
        return self._executor

    def _ensure_checkpointer(self) -> None:
        if self._checkpointer is None or self._checkpointer.done():
            self._checkpointer = asyncio.ensure_future(self._checkpoints())

    async def _checkpoints(self) -> None:
        """One loop for every running handler: extend each lease a third of the way into
        it (SERVER-clock expiry), so a long job is never reaped while its worker lives.
        Runs while the consumer runs or any handler does."""
        tick = min(self.beat_ms, self.lease_ms // 6 or 1) / 1000
        while self._running or self.inflight:
            await asyncio.sleep(tick)
            now = time.monotonic()
            due = [h for h in self._held.values() if h.extend_at <= now]
            if due:
                await asyncio.gather(*(self._extend(h) for h in due))

    async def _extend(self, held: _Held) -> None:
        job = held.job
        try:
            await jobs.extend(self.conn, self.queue, job.id, job.token, held.lease_ms)
            held.renewed()
        except (errors.WireError, errors.Unavailable) as exc:
            # a full, loading or demoted server refused for now: not a lost lease
            log.warning("checkpoint of %s failed, will retry: %s", job.id, exc)
            held.extend_at = time.monotonic() + self.beat_ms / 1000
        except errors.ServerError as exc:
            held.extend_at = float("inf")
            if job.id in self._held:  # not a race with its own ack
                log.warning("job %s lost its lease while running: %s", job.id, exc)

    async def _ack(self, job: Job) -> None:
        """Queue ``job``'s ack for the next pipelined ``ack_many`` and wait for its slot:
        jobs finishing in the same loop turn share one round trip."""
        fut: asyncio.Future[errors.ServerError | None] = (
            asyncio.get_running_loop().create_future())
        self._acks.append((job, fut))
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
                    self.conn, self.queue, [(j.id, j.token) for j, _ in batch],
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
                      deadline: _Held) -> None:
        kind, value = outcome
        priced: dict[str, int] = {}
        if kind == "ok":
            try:  # the hot path: no closure, no row key, one shared ack round trip
                await self._ack(job)
            except errors.EchoMQError:
                pass  # a refusal or a wire error: the patient loop below settles it
            else:
                self.stats.completed += 1
                self._emit("completed", job.id, job.token)
                return
        row = keyspace.job_key(self.queue, job.id)
        if kind == "ok":
            verb: Callable[[], Awaitable[Any]] = lambda: self._ack(job)  # noqa: E731
        elif kind == "delay":
            async def verb() -> Any:
                await (jobs.delay(self.conn, self.queue, job.id, job.token, value.value,
                                    value.mode))
                # the seed's delay leaves attempts alone and the next claim increments it;
                # counting delays on the row keeps them out of the retry budget (as Oban's
                # snooze does), so a delay never spends an attempt
                with contextlib.suppress(errors.EchoMQError):
                    await self.conn.call("HINCRBY", row, "delays", 1)
        else:
            err = f"{type(value).__name__}: {value}"[:MAX_ERROR_CHARS]

            async def verb() -> Any:
                delays = int(await self.conn.call("HGET", row, "delays") or 0)
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
        elif kind == "delay":
            self.stats.delayed += 1
            self._emit("delayed", job.id, job.token, mode=value.mode, value=value.value)
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
        if self.on_event is None:
            return
        try:
            self.on_event(Event(kind, self.queue, job_id, attempts, info, time.time()))
        except Exception:  # a broken observer must not break the loop
            log.exception("on_event observer failed")

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
        if self._executor is not None and self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        return len(left)

    async def serve(self, stop: asyncio.Event, grace_s: float = 30.0) -> int:
        """``run`` until ``stop``, then ``drain`` within ``grace_s``; the unfinished count."""
        await self.run(stop)
        return await self.drain(grace_s)


_validate_policy = backoff.validate  # reachable where a ``backoff=`` parameter shadows it


def _no_handler(job: Job) -> None:  # pragma: no cover - never called
    raise LookupError(f"no handler for job {job.id}")


class _Held:
    """A running job's lease as this process sees it, on the HOST monotonic clock: when to
    checkpoint next and when the lease lapses (a conservative guess of the SERVER-clock
    expiry: it starts after the server priced it)."""

    __slots__ = ("extend_at", "job", "lapses_at", "lease_ms")

    def __init__(self, job: Job, lease_ms: int, first_ms: int) -> None:
        now = time.monotonic()
        self.job = job
        self.lease_ms = lease_ms
        self.lapses_at = now + first_ms / 1000
        self.extend_at = now + first_ms / 3000

    def renewed(self) -> None:
        now = time.monotonic()
        self.lapses_at = now + self.lease_ms / 1000
        self.extend_at = now + self.lease_ms / 3000

    def lapsed(self) -> bool:
        return time.monotonic() >= self.lapses_at
