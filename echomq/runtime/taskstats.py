"""Per-task counts kept in the worker's memory and flushed to the server on the beat.

A consumer with task metrics on holds a ``TaskTally``: the settler adds each run's outcome
(completed, retried, dead, cancelled, timed out) and run time under its task's name, a few
list increments with no I/O, and the claim loop sends what gathered with
``taskmetrics.record`` at most once a second (``FLUSH_EVERY_S``), in the background: one
pipelined batch per queue, never a write per job. A flush that fails is dropped, not
retried in a loop (metrics must not add load to a struggling server): an outage loses at
most the counts of the flushes it refused.

Clocks: run times and the flush cadence are HOST monotonic; the minute the counts land in
is the HOST wall clock at the flush (``time.time``).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from typing import Any

from echomq.runtime.meter import FLUSH_EVERY_S
from echomq.verbs import taskmetrics
from echomq.verbs.metrics import BUCKETS_S

COMPLETED, RETRIED, DEAD, CANCELLED, TIMED_OUT = range(len(taskmetrics.OUTCOMES))
_FIRST_BUCKET = len(taskmetrics.OUTCOMES)
_SUM = taskmetrics.SUM_AT
FINAL_FLUSH_S = 2.0  # the longest a stopping consumer waits for its last flush


class TaskTally:
    """One queue's per-task counts since the last flush (HOST monotonic clock)."""

    __slots__ = ("_flushing", "last_flush", "pending")

    def __init__(self) -> None:
        #: task -> slots in ``taskmetrics.CODES`` order, the time summed in float seconds
        #: until the flush turns it into microseconds
        self.pending: dict[str, list[float]] = {}
        self.last_flush = time.monotonic()
        self._flushing: asyncio.Future[None] | None = None

    def add(self, task: str, outcome: int, seconds: float,
            _bisect: Any = bisect.bisect_left, _bounds: Any = BUCKETS_S) -> None:
        """Count one run of ``task`` that ended ``outcome`` (``COMPLETED`` ...) after
        ``seconds`` (>= 0) of handler time. On the hot path: a dict lookup and three
        increments (the bucket search is a C call; its names are bound as locals)."""
        slots = self.pending.get(task)
        if slots is None:
            slots = self.pending[task] = [0.0] * taskmetrics.WIDTH
        slots[outcome] += 1
        slots[_FIRST_BUCKET + _bisect(_bounds, seconds)] += 1
        slots[_SUM] += seconds

    def due(self) -> bool:
        """Whether a flush interval has passed and there is something to send."""
        return bool(self.pending) and time.monotonic() - self.last_flush >= FLUSH_EVERY_S

    def flush_soon(self, conn: Any, queue: str) -> None:
        """``flush`` in a task of the running loop (a claim never waits on it); one flush
        in flight at a time."""
        if self._flushing is not None and not self._flushing.done():
            return
        self._flushing = asyncio.ensure_future(self.flush(conn, queue))

    async def flush(self, conn: Any, queue: str) -> None:
        """Send what gathered (one ``taskmetrics.record``); dropped on failure."""
        tallies, self.pending = self.pending, {}
        self.last_flush = time.monotonic()
        # a name the server layout refuses (over 200 bytes) must not cost the others
        counts = {t: [*map(int, s[:_SUM]), int(s[_SUM] * 1_000_000)]
                  for t, s in tallies.items()
                  if 0 < len(t.encode()) <= taskmetrics.MAX_TASK_BYTES}
        if not counts:
            return
        try:
            await taskmetrics.record(conn, queue, counts, int(time.time() * 1000))
        except Exception:
            return

    async def final_flush(self, conn: Any, queue: str) -> None:
        """The last flush of a stopping consumer: wait for one in flight, then send the
        rest."""
        if self._flushing is not None and not self._flushing.done():
            await asyncio.wait([self._flushing], timeout=FINAL_FLUSH_S)
        with contextlib.suppress(TimeoutError):  # a stop never hangs on a lost server
            await asyncio.wait_for(self.flush(conn, queue), FINAL_FLUSH_S)
