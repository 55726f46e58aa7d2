"""Settling a job in hand: the ack batcher and the outcome of every other kind.

Success acks (the row is deleted unless the retention keeps completed rows); acks of jobs
finishing in the same loop turn share one pipelined ``ack_many``, and the slots they free
are refilled by a ``claim_many`` in the same round trip (``jobs.ack_and_claim``). An
exception retries after the route's fixed ``retry_delay_ms`` (1000 ms by default) or its
``backoff`` policy priced by ``backoff.delay_ms(policy, attempts)`` (or a ``Retry``'s own
delay), handed to ``jobs.retry`` as a number, and dead-letters at ``max_attempts``, or at
once when ``route.verdict`` says so (``Fail``, ``retry_on``/``dont_retry_on``:
``echomq.runtime.verdict``); the logs and the ``retrying``/``dead`` events say why and
count in runs, failures and delays (``echomq.core.tally``); raising ``Delay`` (or
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
from collections.abc import Awaitable, Callable
from typing import Any

from echomq.core import errors
from echomq.core.tally import Tally
from echomq.runtime.events import Observer, emit
from echomq.runtime.handler import Job
from echomq.runtime.leases import Held
from echomq.runtime.route import Route, task_name
from echomq.runtime.slots import Slots
from echomq.runtime.spread import Spread
from echomq.runtime.stats import ConsumerStats
from echomq.runtime.taskstats import CANCELLED, COMPLETED, DEAD, RETRIED, TIMED_OUT, TaskTally
from echomq.runtime.verdict import describe
from echomq.verbs import jobs
from echomq.verbs.retention import Retention

log = logging.getLogger("echomq.consumer")

MAX_ERROR_CHARS = 2_000


class Settler:
    """Settles the outcomes of the jobs of ``spread``'s queues (each on the queue it came
    from; ``queue`` names them in logs), holding their ``slots`` until they land.

    The consumer hands it what it cannot know: ``start`` (run the jobs a flush claimed),
    ``spawn`` (run a patient settlement in a task that holds the job's slot), ``claiming``
    (whether a flush may claim: the consumer runs and is not stopping) and ``reopens``
    (a ``rate_limited`` span this consumer set ends ``ms`` from now: the claim loop wakes
    then). With a ``tally`` (task metrics on), each settled run of a named route is
    counted there under its outcome, with its handler time.
    """

    def __init__(
        self,
        conn: Any,
        queue: str,
        *,
        spread: Spread,
        lease_ms: int,
        beat_ms: int,
        retention: Retention,
        slots: Slots,
        stats: ConsumerStats,
        on_event: Observer | None,
        start: Callable[[list[jobs.Claim], str], None],
        spawn: Callable[[Job, Awaitable[None]], None],
        claiming: Callable[[], bool],
        reopens: Callable[[int], None],
        tallies: dict[str, TaskTally] | None = None,
    ) -> None:
        self.conn = conn
        self.queue = queue
        self.spread = spread
        self.lease_ms = lease_ms
        self.beat_ms = beat_ms
        self.retention = retention
        self.slots = slots
        self.stats = stats
        self.on_event = on_event
        self.start = start
        self.spawn = spawn
        self.claiming = claiming
        self.reopens = reopens
        self.tallies = tallies or {}
        #: queued acks: (held, the caller's future or None, job, route, lease deadline); the
        #: hot path's entries (no future) carry what the patient fallback needs
        self._acks: list[tuple[Any, ...]] = []
        self._acking: list[tuple[Any, ...]] = []  # the batch in flight
        #: the task sending the queued acks, while one runs
        self.flushing: asyncio.Task[None] | None = None

    def unacked(self) -> list[str]:
        """The hot-path successes whose ack never went out or never came back."""
        return [e[2].id for e in (*self._acking, *self._acks) if e[1] is None]

    def forget(self) -> None:
        """Drop the queued acks (a drain gave up on them: the reaper owns their jobs)."""
        self._acks, self._acking = [], []
        self.slots.settling = 0

    def queue_ack(self, job: Job, route: Route, result: str | None, deadline: Held,
                  ran_s: float = 0.0) -> None:
        """The hot path of a success: queue ``job``'s ack for the next pipelined
        ``ack_many`` and return at once (its task ends; its slot stays taken, counted in
        ``slots.settling``, until the ack lands). The flusher counts it completed, or hands
        a refused or failed ack to the patient ``settle``."""
        held: tuple[Any, ...] = ((job.id, job.token) if result is None else
                                 (job.id, job.token, result, route.keep_result_ms))
        self.slots.settling += 1
        self._acks.append((held, None, job, route, deadline, ran_s))
        if self.flushing is None or self.flushing.done():
            self.flushing = asyncio.get_running_loop().create_task(self._flush_acks())

    async def _ack(self, job: Job, result: str | None = None,
                   keep_result_ms: int | None = None) -> None:
        """Queue ``job``'s ack for the next pipelined ``ack_many`` and wait for its reply
        (the patient path: a refusal or a wire error raises here)."""
        fut: asyncio.Future[errors.ServerError | None] = (
            asyncio.get_running_loop().create_future())
        held: tuple[Any, ...] = ((job.id, job.token) if result is None else
                                 (job.id, job.token, result, keep_result_ms))
        self._acks.append((held, fut, job, None, None, 0.0))
        if self.flushing is None or self.flushing.done():
            self.flushing = asyncio.get_running_loop().create_task(self._flush_acks())
        refused = await fut
        if refused is not None:
            raise refused

    async def _flush_acks(self) -> None:
        # Started by the first ack of a loop turn: it runs after every job task that turn
        # already scheduled, so the acks of one claim's jobs go out together.
        slots, spread = self.slots, self.spread
        keep = self.retention.keeps_completed
        while self._acks:
            batch, self._acks = self._acks, []
            # the slots these acks free (and any idle ones) are refilled in the same round
            # trip: ack_many and claim_many pipelined, each its own atomic transition
            want = 0
            if self.claiming():
                want = max(0, slots.free() + len(batch))
            split = spread.split(want)
            asked = sum(split.values())
            slots.reserved += asked
            self._acking = batch
            try:
                if spread.single:
                    q = spread.queues[0]
                    replies, got = await jobs.ack_and_claim(
                        self.conn, q, [entry[0] for entry in batch], self.lease_ms, asked,
                        keep=keep)
                    claimed = {q: got} if asked else {}
                else:
                    replies, claimed = await self._across(batch, split, keep)
            except Exception as exc:
                for entry in batch:
                    self._acked(entry, exc, failed=True)
                continue
            finally:
                slots.reserved -= asked
                self._acking = []
            for entry, reply in zip(batch, replies, strict=True):
                self._acked(entry, reply)
            for q, claims in claimed.items():
                spread.claimed(q, split[q], len(claims))
                if claims:
                    self.start(claims, q)
            slots.freed()

    async def _across(self, batch: list[tuple[Any, ...]], split: dict[str, int], keep: bool
                      ) -> tuple[list[Exception | None], dict[str, list[jobs.Claim]]]:
        """A partitioned queue's flush: each partition's acks and its share of the claims
        in one pipelined round trip; the ack replies in ``batch``'s order."""
        by_queue: dict[str, list[Any]] = {}
        for entry in batch:
            by_queue.setdefault(entry[2].queue, []).append(entry[0])
        refusals, claimed = await jobs.ack_and_claim_queues(
            self.conn, by_queue, split, self.lease_ms, keep)
        taken = {q: iter(r) for q, r in refusals.items()}
        return [next(taken[entry[2].queue]) for entry in batch], claimed

    def _acked(self, entry: tuple[Any, ...], reply: Exception | None, *,
               failed: bool = False) -> None:
        """One ack's reply (``failed``: the whole call raised ``reply``): to its waiting
        caller, or (hot path) counted here."""
        _held, fut, job, route, deadline, ran_s = entry
        if fut is not None:
            if not fut.done():
                if failed:
                    fut.set_exception(reply)
                else:
                    fut.set_result(reply)
            return
        self.slots.settling -= 1
        if reply is None:
            self.stats.completed += 1
            self._count(job, route, COMPLETED, ran_s)
            if self.on_event is not None:
                self._emit("completed", job)
            return
        # refused (another holder, or an earlier try that landed) or weather: the patient
        # loop settles it, holding the slot in its own task
        result = _held[2] if len(_held) > 2 else None
        self.spawn(job, self.settle(job, route, ("ok", result), deadline, tried=True,
                                    ran_s=ran_s))

    async def settle(self, job: Job, route: Route, outcome: tuple[str, Any],
                     deadline: Held, *, tried: bool = False,
                     handed_back: bool = False, ran_s: float = 0.0) -> None:
        """Record ``outcome``, patiently: retried through weather until the lease would
        have lapsed. ``tried``: a success whose batched ack already failed once.
        ``handed_back``: a ``delay`` that sends another app's job back to its queue
        (counted and reported as ``handed_back``, not as the handler's own delay).
        ``ran_s``: the handler's time (HOST monotonic), for the task metrics."""
        kind, value = outcome
        priced: dict[str, int] = {}
        keep_ms = route.keep_result_ms
        done = Tally(runs=job.token)  # a success's counts, for its callback: read before
        if kind == "ok" and route.after is not None and route.after.wants("completed"):
            with contextlib.suppress(errors.EchoMQError):  # the ack may delete the row
                done = (await jobs.tally(self.conn, job.queue, job.id))._replace(
                    runs=job.token)
        if kind == "ok" and not tried:
            try:  # the hot path: no closure, no row key, one shared ack round trip
                await self._ack(job, value, keep_ms)
            except errors.EchoMQError:
                pass  # a refusal or a wire error: the patient loop below settles it
            else:
                self.stats.completed += 1
                self._count(job, route, COMPLETED, ran_s)
                self._emit("completed", job)
                await self._after(job, route, "completed", tally=done)
                return
        if kind == "timeout":
            self.stats.timed_out += 1
            self._emit("timed_out", job, error=f"TimeoutError: {value}")
        if kind == "ok":
            verb: Callable[[], Awaitable[Any]] = lambda: self._ack(job, value, keep_ms)  # noqa: E731
        elif kind == "cancelled":
            verb = lambda: jobs.finish_cancelled(  # noqa: E731
                self.conn, job.queue, job.id, job.token)
        elif kind == "rate_limited":
            # back to the front of its lane (or pending) with its attempt given back; its
            # group (or the queue) is blocked for the span, on the SERVER clock
            verb = lambda: jobs.rate_limited(  # noqa: E731
                self.conn, job.queue, job.id, job.token, value.ms)
        elif kind == "delay":
            async def verb() -> Any:
                try:
                    await jobs.delay(self.conn, job.queue, job.id, job.token, value.value,
                                     value.mode)
                except errors.StateError:  # wire 6: EMQ.DELAY refuses a grouped row
                    await jobs.delay(self.conn, job.queue, job.id, job.token, value.value,
                                     value.mode, native=False)
                # a delay leaves attempts alone and the next claim increments it;
                # counting delays on the row keeps them out of the retry budget (as Oban's
                # snooze does), so a delay never spends an attempt
                with contextlib.suppress(errors.EchoMQError):
                    await jobs.count_delay(self.conn, job.queue, job.id)
        else:
            verdict = route.verdict(value)
            err = verdict.error[:MAX_ERROR_CHARS]
            seen: list[Tally] = []

            async def verb() -> Any:
                tally = await jobs.tally(self.conn, job.queue, job.id)
                tried = max(1, job.token - tally.delays)  # claims that were not after a delay
                priced.update(tried=tried, delay_ms=(
                    route.retry_delay(tried) if verdict.delay_ms is None else verdict.delay_ms))
                # a final verdict dead-letters now: the fence held, so token >= 1
                budget = 1 if verdict.final else route.max_attempts + tally.delays
                seen[:] = [tally._replace(runs=job.token, failures=tally.failures + 1)]
                return await (jobs.retry(self.conn, job.queue, job.id, job.token,
                                           priced["delay_ms"], budget, err))
        pause = self.beat_ms / 1000
        while True:
            try:
                result = await verb()
                break
            except (errors.WireError, errors.Unavailable) as exc:
                # Unavailable too: a restarted server answers LOADING, a full one OOM, a
                # demoted one READONLY, and each wrote nothing: the same weather
                if deadline.lapsed():
                    log.warning("job %s %s: outcome %s not recorded before its lease "
                                "lapsed (%s); the reaper will return it", job.id,
                                _task(route, deadline), kind, exc)
                    self.stats.lost += 1
                    self._emit("lost", job, outcome=kind)
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
            except errors.ServerError as exc:
                if await self._landed_before(job, kind, exc):
                    if kind == "ok":
                        self._count(job, route, COMPLETED, ran_s)
                    return
                log.warning("job %s %s: %s refused (%s); another holder owns it now",
                            job.id, _task(route, deadline), kind, exc)
                self.stats.lost += 1
                self._emit("lost", job, outcome=kind, error=str(exc))
                return
        if kind == "ok":
            self.stats.completed += 1
            self._count(job, route, COMPLETED, ran_s)
            self._emit("completed", job)
            await self._after(job, route, "completed", tally=done)
        elif kind == "rate_limited":
            self.stats.rate_limited += 1
            # its group (or the queue) reopens then, with no wake token: claim again then
            self.reopens(value.ms)
            self._emit("rate_limited", job, ms=value.ms)
        elif kind == "delay" and handed_back:
            self.stats.handed_back += 1
            self._emit("handed_back", job, ms=value.value,
                       task=_task(route, deadline))
        elif kind == "delay":
            self.stats.delayed += 1
            self._emit("delayed", job, mode=value.mode, value=value.value)
        elif kind == "cancelled" or result == "cancelled":
            # a failure of a cancel-marked row ends it cancelled too (retry's CANCELLED)
            self.stats.cancelled += 1
            self._count(job, route, CANCELLED, ran_s)
            self._emit("cancelled", job)
        elif result == "dead":
            self.stats.dead += 1
            self._count(job, route, DEAD, ran_s)
            tally, reason = seen[0], verdict.reason if verdict.final else "exhausted"
            # one line per failure: the task, the counts, why, and the run time last (as
            # every job line ends)
            log.error("job %s %s: dead after %s%s: %s (%.1f ms)", job.id,
                      _task(route, deadline), tally.text(), describe(reason), verdict.error,
                      deadline.ran_ms())
            self._emit("dead", job, tried=priced["tried"], error=verdict.error,
                       reason=reason, **tally.info())
            await self._after(job, route, "dead", error=value, error_text=verdict.error,
                              reason=reason, tally=tally)
        else:
            self.stats.retried += 1
            self._count(job, route, TIMED_OUT if kind == "timeout" else RETRIED, ran_s)
            tally, delay_ms = seen[0], priced["delay_ms"]
            log.warning("job %s %s: failed on run %d %s, retry in %d ms%s: %s (%.1f ms)",
                        job.id, _task(route, deadline), tally.runs, tally.detail(), delay_ms,
                        " (Retry)" if verdict.reason == "retry" else "", verdict.error,
                        deadline.ran_ms())
            self._emit("retrying", job, delay_ms=delay_ms,
                       tried=priced["tried"], error=verdict.error, reason=verdict.reason,
                       **tally.info())
            await self._after(job, route, "retrying", error=value, error_text=verdict.error,
                              reason=verdict.reason, delay_ms=delay_ms, tally=tally)

    async def _after(self, job: Job, route: Route, outcome: str, *, tally: Tally,
                     **facts: Any) -> None:
        """The task's callback for ``outcome``, now that it is recorded (in the job's slot;
        its errors are logged, never raised)."""
        after = route.after
        if after is None or not after.wants(outcome):
            return
        await after.run(job.queue, job.id, outcome, runs=tally.runs,
                        failures=tally.failures, delays=tally.delays, **facts)

    async def _landed_before(self, job: Job, kind: str, exc: errors.ServerError) -> bool:
        """True (and counted) when a refused outcome only found its own earlier try: the
        row is gone or settled at this job's token (see ``jobs.fate``)."""
        try:
            fate = await jobs.fate(self.conn, job.queue, job.id, job.token)
        except errors.EchoMQError:
            return False
        if fate == "moved":
            return False
        self.stats.already_settled += 1
        if kind == "ok":
            self.stats.completed += 1
        log.info("job %s %s: %s already settled (%s; row %s at token %d): an earlier "
                 "try landed", job.id, job_task(job), kind, exc, fate, job.token)
        self._emit("settled", job, outcome=kind, fate=fate, error=str(exc))
        return True

    def _count(self, job: Job, route: Route, outcome: int, ran_s: float) -> None:
        tally = self.tallies.get(job.queue) if self.tallies else None
        if tally is not None and route.name is not None:
            tally.add(route.name, outcome, ran_s)

    def _emit(self, kind: str, job: Job, **info: Any) -> None:
        emit(self.on_event, kind, job.queue, job.id, job.token, info)


def _task(route: Route | None, held: Held) -> str:
    """The task a settlement's log line names: the route's, else the one the job's payload
    names (``?`` for a payload that is no task's)."""
    return (route.name if route is not None else None) or held.name or job_task(held.job)


def job_task(job: Job) -> str:
    return task_name(job.payload)
