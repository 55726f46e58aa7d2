"""What a recorded outcome reports: a failed run's retry and its report (retrying, dead
or cancelled), the task's callbacks, and the task a log line names.

A failed (or timed-out) run's retry is priced once the row's counts are read: the route's
``retry_delay_ms`` or ``backoff`` (``backoff.delay_ms(policy, tried)``), or a ``Retry``'s
own delay, over the runs that count against ``max_attempts`` (claims that followed a delay
do not); a final verdict (``Fail``, ``retry_on``/``dont_retry_on``:
``echomq.runtime.verdict``) dead-letters at once. The log line and the ``retrying``/``dead``
events say why and count in runs, failures and delays (``echomq.core.tally``).

Clocks: the run times in the log lines are HOST monotonic; the retry delay handed to the
script is priced on the SERVER clock.
"""

from __future__ import annotations

import logging
from typing import Any

from echomq.core.tally import Tally
from echomq.runtime.context import Context
from echomq.runtime.handler import Job
from echomq.runtime.leases import Held
from echomq.runtime.route import Route, task_name
from echomq.runtime.taskstats import CANCELLED, DEAD
from echomq.runtime.verdict import describe, formatted
from echomq.verbs import jobs

log = logging.getLogger("echomq.consumer")

MAX_ERROR_CHARS = 2_000


class Retrying:
    """A failed (or timed-out) run's settlement: the retry transition, priced once the
    row's counts are read, and its report by what it answered (retrying, dead, or
    cancelled: a failure of a cancel-marked row ends it cancelled). ``code``: the task
    metrics' outcome of a retry (``RETRIED`` or ``TIMED_OUT``)."""

    def __init__(self, ctx: Context, job: Job, route: Route, error: BaseException,
                 deadline: Held, ran_s: float, code: int) -> None:
        self.ctx, self.job, self.route, self.error = ctx, job, route, error
        self.deadline, self.ran_s, self.code = deadline, ran_s, code
        self.verdict = route.verdict(error)
        self.tally = Tally()  # the row's counts with this failure, once read
        self.tried = 0  # the runs that count against max_attempts
        self.delay_ms = 0
        #: the run's formatted traceback (bounded): kept on the row and logged whole
        self.traceback = formatted(error)

    async def verb(self) -> Any:
        job, route, verdict, conn = self.job, self.route, self.verdict, self.ctx.conn
        tally = await jobs.tally(conn, job.queue, job.id)
        self.tried = max(1, job.token - tally.delays)  # claims that were not after a delay
        self.delay_ms = (route.retry_delay(self.tried) if verdict.delay_ms is None
                         else verdict.delay_ms)
        # a final verdict dead-letters now: the fence held, so token >= 1
        budget = 1 if verdict.final else route.max_attempts + tally.delays
        self.tally = tally._replace(runs=job.token, failures=tally.failures + 1)
        return await jobs.retry(conn, job.queue, job.id, job.token, self.delay_ms, budget,
                                verdict.error[:MAX_ERROR_CHARS], self.traceback,
                                self.ctx.retention.keep_errors)

    async def report(self, reply: Any) -> None:
        ctx, job, route, verdict = self.ctx, self.job, self.route, self.verdict
        tally, deadline = self.tally, self.deadline
        if reply == "cancelled":
            await cancelled(ctx, job, route, self.ran_s)
        elif reply == "dead":
            ctx.stats.dead += 1
            ctx.member_ended(job, "dead")
            ctx.count(job, route.name, DEAD, self.ran_s)
            reason = verdict.reason if verdict.final else "exhausted"
            # one line per failure: the task, the counts, why, and the run time last (as
            # every job line ends)
            log.error("job %s %s: dead after %s%s: %s (%.1f ms)\n%s", job.id,
                      task_of(route, deadline), tally.text(), describe(reason), verdict.error,
                      deadline.ran_ms(), self.traceback)
            ctx.emit("dead", job, tried=self.tried, error=verdict.error, reason=reason,
                     **tally.info())
            await after(job, route, "dead", error=self.error, error_text=verdict.error,
                        reason=reason, tally=tally)
        else:
            ctx.stats.retried += 1
            ctx.count(job, route.name, self.code, self.ran_s)
            log.warning("job %s %s: failed on run %d %s, retry in %d ms%s: %s (%.1f ms)\n%s",
                        job.id, task_of(route, deadline), tally.runs, tally.detail(),
                        self.delay_ms, " (Retry)" if verdict.reason == "retry" else "",
                        verdict.error, deadline.ran_ms(), self.traceback)
            ctx.emit("retrying", job, delay_ms=self.delay_ms, tried=self.tried,
                     error=verdict.error, reason=verdict.reason, **tally.info())
            await after(job, route, "retrying", error=self.error, error_text=verdict.error,
                        reason=verdict.reason, delay_ms=self.delay_ms, tally=tally)


async def cancelled(ctx: Context, job: Job, route: Route, ran_s: float) -> None:
    """A cancelled job's report (a cancel, or a failure of a cancel-marked row)."""
    ctx.stats.cancelled += 1
    ctx.member_ended(job, "cancelled")
    ctx.count(job, route.name, CANCELLED, ran_s)
    ctx.emit("cancelled", job)


async def after(job: Job, route: Route, outcome: str, *, tally: Tally, **facts: Any) -> None:
    """The task's callback for ``outcome``, now that it is recorded (in the job's slot; its
    errors are logged, never raised)."""
    callbacks = route.after
    if callbacks is None or not callbacks.wants(outcome):
        return
    await callbacks.run(job.queue, job.id, outcome, runs=tally.runs, failures=tally.failures,
                        delays=tally.delays, **facts)


def task_of(route: Route | None, held: Held) -> str:
    """The task a settlement's log line names: the route's, else the one the job's payload
    names (``?`` for a payload that is no task's)."""
    return (route.name if route is not None else None) or held.name or task_name(held.job.payload)
