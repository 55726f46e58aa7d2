"""Lease checkpoints for the jobs a consumer holds: extension and cancel requests.

Theory of operation. One loop per consumer walks the held jobs every ``tick`` and sends
``jobs.checkpoint`` for each whose checkpoint is due: the lease expiry moves to SERVER now +
lease, and the reply says whether a cancel was requested (``jobs.cancel`` marks an active
row; its holder learns it here). Checkpoints come every third of the lease less one tick,
so a cancel is seen within a third of the lease of its request (plus a round trip), and a
live worker's job is never reaped. A refused checkpoint (the token is stale: the lease
lapsed and another holder has the job) stops checkpointing that job; a wire error retries
after a beat.

A handler with a timeout is no longer held once its deadline passes (the consumer stops
or abandons it first), so the lease is extended only while the handler is within its
timeout.

Clocks: the cadence and ``lapsed()`` read the HOST monotonic clock; the lease expiry the
checkpoint writes is SERVER ms.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from echomq.core import errors
from echomq.runtime.handler import Job
from echomq.runtime.weather import Weather
from echomq.verbs import jobs

log = logging.getLogger("echomq.consumer")


class Held:
    """A running job's lease as this process sees it, on the HOST monotonic clock: when to
    checkpoint next and when the lease lapses (a conservative guess of the SERVER-clock
    expiry: it starts after the server priced it). ``task`` is the task running an
    ``async`` handler (cancelled on a cancel request), ``None`` for a plain function.
    ``name`` is the job's task name and ``started`` when it started (HOST wall clock, the
    worker's busy list) and ``began`` (HOST monotonic, its run time in the logs)."""

    __slots__ = ("began", "every", "extend_at", "job", "lapses_at", "lease_ms", "name",
                 "started", "task")

    def __init__(self, job: Job, lease_ms: int, first_ms: int, tick: float,
                 task: asyncio.Task[Any] | None = None, name: str | None = None) -> None:
        now = time.monotonic()
        self.began = now
        self.started = time.time()
        self.name = name
        self.job = job
        self.lease_ms = lease_ms
        self.task = task
        self.every = max(lease_ms / 3000 - tick, lease_ms / 4000)
        self.lapses_at = now + first_ms / 1000
        self.extend_at = now + max(first_ms / 3000 - tick, first_ms / 4000)

    def renewed(self) -> None:
        now = time.monotonic()
        self.lapses_at = now + self.lease_ms / 1000
        self.extend_at = now + self.every

    def ran_ms(self) -> float:
        """How long the job has run so far (HOST monotonic ms)."""
        return (time.monotonic() - self.began) * 1000

    def lapsed(self) -> bool:
        return time.monotonic() >= self.lapses_at


def tick_for(beat_ms: int, lease_ms: int) -> float:
    """How often (s) the checkpoint loop looks at its held jobs: a beat, or a twelfth of
    the lease when that is shorter."""
    return min(beat_ms, lease_ms // 12 or 1) / 1000


class Checkpoints:
    """The checkpoint loop of one consumer over ``held`` (job id -> ``Held``; each job's
    checkpoint on the queue it came from, ``queue`` names the consumer's)."""

    def __init__(self, conn: Any, queue: str, beat_ms: int, tick: float,
                 weather: Weather | None = None) -> None:
        self.conn = conn
        self.weather = weather if weather is not None else Weather(f"consumer {queue}")
        # the consumer's own name: its claim loop, which always runs, answers for it once
        # the server is back (this loop runs only while jobs are held)
        self.source = f"consumer {queue}"
        self.queue = queue
        self.beat_ms = beat_ms
        self.tick = tick
        self.held: dict[str, Held] = {}
        self._loop: asyncio.Task[None] | None = None

    def ensure(self, alive: Callable[[], bool]) -> None:
        """Run the loop (``run``) in a task unless one runs: until ``alive()`` turns false."""
        if self._loop is None or self._loop.done():
            self._loop = asyncio.ensure_future(self.run(alive))

    def stop(self) -> None:
        """End the loop's task, if one runs."""
        if self._loop is not None:
            self._loop.cancel()
            self._loop = None

    async def run(self, alive: Callable[[], bool]) -> None:
        """Checkpoint every due lease until ``alive()`` turns false."""
        while alive():
            await asyncio.sleep(self.tick)
            now = time.monotonic()
            due = [h for h in self.held.values() if h.extend_at <= now]
            if due:
                await asyncio.gather(*(self.checkpoint(h) for h in due))

    async def checkpoint(self, held: Held) -> None:
        job = held.job
        try:
            point = await jobs.checkpoint(self.conn, job.queue, job.id, job.token,
                                          held.lease_ms)
            held.renewed()
            self.weather.answered(self.source)
        except (errors.WireError, errors.Unavailable) as exc:
            # a full, loading or demoted server refused for now: not a lost lease
            self.weather.failed(self.source, exc, self.beat_ms)
            held.extend_at = time.monotonic() + self.beat_ms / 1000
            return
        except errors.ServerError as exc:
            held.extend_at = float("inf")
            # not a race with its own ack, nor with a durable step that parked the job
            if self.held.get(job.id) is held and not job._parked:
                log.warning("job %s lost its lease while running: %s", job.id, exc)
            return
        # act only while the handler still runs: once it returned, its outcome is settled
        # by the consumer (which reads job.cancelled before acking)
        if point.cancelled and not job._cancelled and self.held.get(job.id) is held:
            job._cancelled = True
            cancel_requested(held)


def cancel_requested(held: Held) -> None:
    """A checkpoint saw a cancel request for a running job: stop an async handler as
    ``task.cancel()`` would (the runner turns that into its ``Cancelled`` outcome); a plain
    function reads ``job.cancelled``."""
    log.info("job %s: cancel requested", held.job.id)
    if held.task is not None:
        held.task.cancel()
