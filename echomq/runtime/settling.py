"""Settling a job in hand: the ack batcher and the outcome of every other kind.

A run's ``Outcome`` (``echomq.runtime.outcome``) is matched once, in ``Settler.plan``,
into its ``Plan``: the verb that records it and the report (counts, event, log line,
callback) made once it landed.

Success acks (the row is deleted unless the retention keeps completed rows); acks of jobs
finishing in the same loop turn share one pipelined ``ack_many``, and the slots they free
are refilled by a ``claim_many`` in the same round trip (``jobs.ack_and_claim``), which
carries a claim id kept until it is answered: a lost reply's claimed jobs come back at the
next flush instead of being leased to no one for a lease. An
exception (or a timeout) retries after the route's ``retry_delay_ms`` or ``backoff``, or
dead-letters (priced and reported in ``echomq.runtime.reporting``); raising ``Delay`` (or
calling ``job.delay(...)``) sends the job back to the schedule without a failure and
without spending an attempt (claims that followed a delay are counted on the row as
``delays`` and left out of both the backoff index and the budget); raising
``RateLimited(ms)`` (``job.rate_limited(ms)``) hands the job back to the front of its lane
(or pending) with its attempt given back, and its group (or the queue) claims nothing for
``ms``; a cancelled job ends with ``finish_cancelled``. Once a completion, a retry or a
death is recorded, the task's callbacks run (``route.after``: ``echomq.runtime.callbacks``).

An outcome (ack, retry, delay) that hits a wire error is retried until the lease would have
lapsed; after that the reaper owns the job. A refused outcome whose own earlier try had
landed (its reply lost) is counted ``already_settled``, not lost.

Clocks: the retry pauses are on the HOST monotonic clock (the event loop's); the delays and
rate windows handed to the scripts are priced on the SERVER clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, assert_never

from echomq.core import errors
from echomq.core.tally import Tally
from echomq.runtime.context import Context
from echomq.runtime.handler import Job
from echomq.runtime.leases import Held
from echomq.runtime.outcome import (
    Cancelled,
    Completed,
    Delayed,
    Failed,
    Limited,
    Outcome,
    Suspended,
    TimedOut,
)
from echomq.runtime.reporting import Retrying, after, cancelled, task_of
from echomq.runtime.route import Route, task_name
from echomq.runtime.taskstats import COMPLETED, RETRIED, TIMED_OUT
from echomq.verbs import jobs

log = logging.getLogger("echomq.consumer")


async def _nothing() -> None:
    """A transition already made (a durable step's script parked the job)."""


class Ack(NamedTuple):
    """A success waiting in the ack batch. ``waiter``: the patient caller's future for the
    reply; ``None`` on the hot path, whose entry carries what the patient fallback needs
    (``route``, ``deadline``, ``ran_s``: the handler's HOST monotonic seconds)."""

    job: Job
    result: str | bytes | None  # the JSON text the ack keeps (bytes: coded), or None
    keep_result_ms: int | None
    waiter: asyncio.Future[BaseException | None] | None
    route: Route | None = None
    deadline: Held | None = None
    ran_s: float = 0.0

    def item(self) -> jobs.AckEntry:
        """The entry ``jobs.ack_many`` sends for it."""
        job = self.job
        if self.result is None:
            return (job.id, job.token)
        return (job.id, job.token, self.result, self.keep_result_ms)


class Plan(NamedTuple):
    """One outcome's settlement: ``verb`` records it (retried through weather), ``report``
    counts, emits, logs and calls back once it landed (given the verb's reply), and
    ``landed`` counts what an earlier try that did land recorded (its reply lost)."""

    verb: Callable[[], Awaitable[Any]]
    report: Callable[[Any], Awaitable[None]]
    landed: Callable[[], None] | None = None


class Settler:
    """Settles the outcomes of the jobs of ``ctx``'s queues (each on the queue it came
    from), holding their slots until they land. With task metrics on (``ctx.tallies``),
    each settled run of a named route is counted there under its outcome, with its
    handler time."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._acks: list[Ack] = []  # queued for the next batch
        self._acking: list[Ack] = []  # the batch in flight
        #: the task sending the queued acks, while one runs
        self.flushing: asyncio.Task[None] | None = None
        #: the id of an ack+claim's claim sent and not answered, kept for the next flush
        #: (as ``ClaimLoop.claim_id``): a lost reply's jobs come back instead of waiting
        #: out their lease
        self.claim_id: str | None = None

    def unacked(self) -> list[str]:
        """The hot-path successes whose ack never went out or never came back."""
        return [a.job.id for a in (*self._acking, *self._acks) if a.waiter is None]

    def forget(self) -> None:
        """Drop the queued acks (a drain gave up on them: the reaper owns their jobs)."""
        self._acks, self._acking = [], []
        self.ctx.slots.settling = 0

    # -- the ack batch ---------------------------------------------------------------------

    def queue_ack(self, job: Job, route: Route, result: str | bytes | None, deadline: Held,
                  ran_s: float = 0.0) -> None:
        """The hot path of a success: queue ``job``'s ack for the next pipelined
        ``ack_many`` and return at once (its task ends; its slot stays taken, counted in
        ``slots.settling``, until the ack lands). The flusher counts it completed, or hands
        a refused or failed ack to the patient ``settle``."""
        self.ctx.slots.settling += 1
        self._acks.append(Ack(job, result, route.keep_result_ms, None, route, deadline, ran_s))
        if self.flushing is None or self.flushing.done():
            self.flushing = asyncio.get_running_loop().create_task(self._flush_acks())

    async def _ack(self, job: Job, result: str | bytes | None = None,
                   keep_result_ms: int | None = None) -> None:
        """Queue ``job``'s ack for the next pipelined ``ack_many`` and wait for its reply
        (the patient path: a refusal or a wire error raises here)."""
        waiter: asyncio.Future[BaseException | None] = (
            asyncio.get_running_loop().create_future())
        self._acks.append(Ack(job, result, keep_result_ms, waiter))
        if self.flushing is None or self.flushing.done():
            self.flushing = asyncio.get_running_loop().create_task(self._flush_acks())
        refused = await waiter
        if refused is not None:
            raise refused

    async def _flush_acks(self) -> None:
        # Started by the first ack of a loop turn: it runs after every job task that turn
        # already scheduled, so the acks of one claim's jobs go out together.
        ctx = self.ctx
        slots, spread = ctx.slots, ctx.spread
        keep = ctx.retention.keeps_completed
        while self._acks:
            batch, self._acks = self._acks, []
            # the slots these acks free (and any idle ones) are refilled in the same round
            # trip: ack_many and claim_many pipelined, each its own atomic transition
            want = 0
            if ctx.claiming():
                want = max(0, slots.free() + len(batch))
            split = spread.split(want)
            asked = sum(split.values())
            slots.reserved += asked
            self._acking = batch
            if asked and self.claim_id is None:
                self.claim_id = secrets.token_hex(8)
            try:
                if spread.single:
                    q = spread.queues[0]
                    replies, got = await jobs.ack_and_claim(
                        ctx.conn, q, [a.item() for a in batch], ctx.lease_ms, asked,
                        keep=keep, claim_id=self.claim_id if asked else None)
                    claimed = {q: got} if asked else {}
                else:
                    replies, claimed = await self._across(batch, split, keep)
                if asked:
                    self.claim_id = None
            except Exception as exc:
                for ack in batch:
                    self._acked(ack, exc, failed=True)
                continue
            finally:
                slots.reserved -= asked
                self._acking = []
            for ack, reply in zip(batch, replies, strict=True):
                self._acked(ack, reply)
            for q, claims in claimed.items():
                spread.claimed(q, split[q], len(claims))
                if claims:
                    ctx.start(claims, q)
            slots.freed()

    async def _across(self, batch: list[Ack], split: dict[str, int], keep: bool
                      ) -> tuple[list[Exception | None], dict[str, list[jobs.Claim]]]:
        """A partitioned queue's flush: each partition's acks and its share of the claims
        in one pipelined round trip; the ack replies in ``batch``'s order."""
        by_queue: dict[str, list[jobs.AckEntry]] = {}
        for ack in batch:
            by_queue.setdefault(ack.job.queue, []).append(ack.item())
        refusals, claimed = await jobs.ack_and_claim_queues(
            self.ctx.conn, by_queue, split, self.ctx.lease_ms, keep,
            self.claim_id if any(split.values()) else None)
        taken = {q: iter(r) for q, r in refusals.items()}
        return [next(taken[ack.job.queue]) for ack in batch], claimed

    def _acked(self, ack: Ack, reply: Exception | None, *, failed: bool = False) -> None:
        """One ack's reply (``failed``: the whole call raised ``reply``): to its waiting
        caller, or (hot path) counted here."""
        waiter, job = ack.waiter, ack.job
        if waiter is not None:
            if not waiter.done():
                if failed and reply is not None:
                    waiter.set_exception(reply)
                else:
                    waiter.set_result(reply)
            return
        ctx = self.ctx
        ctx.slots.settling -= 1
        route, deadline = ack.route, ack.deadline
        assert route is not None and deadline is not None  # a hot-path entry carries them
        if reply is None:
            ctx.stats.completed += 1
            ctx.member_ended(job, "completed")
            ctx.count(job, route.name, COMPLETED, ack.ran_s)
            if ctx.on_event is not None:
                ctx.emit("completed", job)
            return
        # refused (another holder, or an earlier try that landed) or weather: the patient
        # loop settles it, holding the slot in its own task
        ctx.spawn(job, self.settle(job, route, Completed(ack.result), deadline,
                                   ran_s=ack.ran_s))

    # -- every outcome, patiently ------------------------------------------------------------

    async def settle(self, job: Job, route: Route, outcome: Outcome, deadline: Held, *,
                     ran_s: float = 0.0) -> None:
        """Record ``outcome``, patiently: retried through weather until the lease would
        have lapsed, then reported. ``ran_s``: the handler's time (HOST monotonic), for
        the task metrics."""
        ctx = self.ctx
        plan = await self.plan(job, route, outcome, deadline, ran_s)
        pause = ctx.beat_ms / 1000
        while True:
            try:
                reply = await plan.verb()
                break
            except (errors.WireError, errors.Unavailable) as exc:
                # Unavailable too: a restarted server answers LOADING, a full one OOM, a
                # demoted one READONLY, and each wrote nothing: the same weather
                if deadline.lapsed():
                    log.warning("job %s %s: outcome %s not recorded before its lease "
                                "lapsed (%s); the reaper will return it", job.id,
                                task_of(route, deadline), outcome.kind, exc)
                    ctx.stats.lost += 1
                    ctx.emit("lost", job, outcome=outcome.kind)
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
            except errors.ServerError as exc:
                if not await self._landed_before(job, outcome.kind, exc, plan.landed):
                    log.warning("job %s %s: %s refused (%s); another holder owns it now",
                                job.id, task_of(route, deadline), outcome.kind, exc)
                    ctx.stats.lost += 1
                    ctx.emit("lost", job, outcome=outcome.kind, error=str(exc))
                return
        await plan.report(reply)

    async def plan(self, job: Job, route: Route, outcome: Outcome, deadline: Held,
                   ran_s: float) -> Plan:
        """The one place an outcome is matched: the verb that records it and its report."""
        conn, queue, ctx = self.ctx.conn, job.queue, self.ctx
        match outcome:
            case Completed(result=result):
                return await self._completion(job, route, result, ran_s)
            case Failed(error=error):
                return self._retry(job, route, error, deadline, ran_s, RETRIED)
            case TimedOut(error=timeout):
                ctx.stats.timed_out += 1
                ctx.emit("timed_out", job, error=f"TimeoutError: {timeout}")
                return self._retry(job, route, timeout, deadline, ran_s, TIMED_OUT)
            case Delayed(mode=mode, value=value, handed_back=handed_back):
                async def delayed(_reply: Any) -> None:
                    if handed_back:
                        ctx.stats.handed_back += 1
                        ctx.emit("handed_back", job, ms=value, task=task_of(route, deadline))
                    else:
                        ctx.stats.delayed += 1
                        ctx.emit("delayed", job, mode=mode, value=value)
                return Plan(lambda: self._delay(job, mode, value), delayed)
            case Limited(ms=ms):
                async def limited(_reply: Any) -> None:
                    ctx.stats.rate_limited += 1
                    # its group (or the queue) reopens then, with no wake token: the idle
                    # claim loop wakes then
                    ctx.wake.note(ms, kick=True)
                    ctx.emit("rate_limited", job, ms=ms)
                # back to the front of its lane (or pending) with its attempt given back;
                # its group (or the queue) is blocked for the span, on the SERVER clock
                return Plan(lambda: jobs.rate_limited(conn, queue, job.id, job.token, ms),
                            limited)
            case Cancelled():
                return Plan(lambda: jobs.finish_cancelled(conn, queue, job.id, job.token),
                            lambda _reply: cancelled(ctx, job, route, ran_s))
            case Suspended():
                # the step's script parked the job (and counted its delay): nothing to
                # record, only the report
                parked = outcome
                return Plan(_nothing, lambda _reply: self._suspended(job, route, parked,
                                                                     ran_s))
            case _:
                assert_never(outcome)

    async def _suspended(self, job: Job, route: Route, parked: Suspended, ran_s: float
                         ) -> None:
        ctx = self.ctx
        if parked.state == "cancelled":  # a cancel came first: the script ended it so
            await cancelled(ctx, job, route, ran_s)
            return
        ctx.stats.suspended += 1
        ctx.emit("suspended", job, step=parked.step, state=parked.state,
                 wake_ms=parked.wake_ms, signal=parked.signal)

    def _retry(self, job: Job, route: Route, error: BaseException, deadline: Held,
               ran_s: float, code: int) -> Plan:
        retrying = Retrying(self.ctx, job, route, error, deadline, ran_s, code)
        return Plan(retrying.verb, retrying.report)

    async def _completion(self, job: Job, route: Route, result: str | bytes | None,
                          ran_s: float) -> Plan:
        ctx = self.ctx
        done = Tally(runs=job.token)  # a success's counts, for its callback: read before
        if route.after is not None and route.after.wants("completed"):
            with contextlib.suppress(errors.EchoMQError):  # the ack may delete the row
                done = (await jobs.tally(ctx.conn, job.queue, job.id))._replace(
                    runs=job.token)

        async def completed(_reply: Any) -> None:
            ctx.stats.completed += 1
            ctx.member_ended(job, "completed")
            ctx.count(job, route.name, COMPLETED, ran_s)
            ctx.emit("completed", job)
            await after(job, route, "completed", tally=done)

        def landed() -> None:
            ctx.stats.completed += 1
            ctx.member_ended(job, "completed")  # a repeated notice counts once
            ctx.count(job, route.name, COMPLETED, ran_s)

        return Plan(lambda: self._ack(job, result, route.keep_result_ms), completed, landed)

    async def _delay(self, job: Job, mode: str, value: int) -> None:
        conn = self.ctx.conn
        try:
            await jobs.delay(conn, job.queue, job.id, job.token, value, mode)
        except errors.StateError:  # wire 6: EMQ.DELAY refuses a grouped row
            await jobs.delay(conn, job.queue, job.id, job.token, value, mode, native=False)
        # a delay leaves attempts alone and the next claim increments it; counting delays
        # on the row keeps them out of the retry budget (as Oban's snooze does), so a delay
        # never spends an attempt
        with contextlib.suppress(errors.EchoMQError):
            await jobs.count_delay(conn, job.queue, job.id)

    async def _landed_before(self, job: Job, kind: str, exc: errors.ServerError,
                             landed: Callable[[], None] | None) -> bool:
        """True (and counted: ``landed``) when a refused outcome only found its own earlier
        try: the row is gone or settled at this job's token (see ``jobs.fate``)."""
        ctx = self.ctx
        try:
            fate = await jobs.fate(ctx.conn, job.queue, job.id, job.token)
        except errors.EchoMQError:
            return False
        if fate == "moved":
            return False
        ctx.stats.already_settled += 1
        if landed is not None:
            landed()
        log.info("job %s %s: %s already settled (%s; row %s at token %d): an earlier "
                 "try landed", job.id, task_name(job.payload), kind, exc, fate, job.token)
        ctx.emit("settled", job, outcome=kind, fate=fate, error=str(exc))
        return True
