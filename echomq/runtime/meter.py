"""A consumer's runtime numbers, gathered in its memory and sent once a second.

What only the runtime knows (each handler run's duration, the last beat's duration, the
degraded streak, completed and failed counts) a ``Meter`` gathers per queue, a list append
and a counter per run, and ``flush`` folds into the queue's server-side metrics with one
``metrics.observe`` (``echomq.verbs.metrics``) at most once a second (``FLUSH_EVERY_S``),
in the background: one round trip a second, whatever the job rate. It lives here, not
beside the verb, because it keeps process state and reads the host clock.

Clocks: durations and the flush cadence are HOST monotonic.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from echomq.verbs import metrics

#: how often (s) a consumer's gathered numbers go to the server, at most
FLUSH_EVERY_S = 1.0


@dataclass
class Meter:
    """A consumer's numbers since its last ``flush`` (HOST monotonic clock)."""

    durations: list[float] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    beat_s: float | None = None
    last_flush: float = field(default_factory=time.monotonic)
    _flushing: asyncio.Future[None] | None = field(default=None, repr=False)

    def handled(self, seconds: float, ok: bool) -> None:
        self.durations.append(max(0.0, seconds))
        if ok:
            self.completed += 1
        else:
            self.failed += 1

    def due(self) -> bool:
        """Whether a second has passed since the last flush and there is news."""
        return (time.monotonic() - self.last_flush >= FLUSH_EVERY_S
                and bool(self.durations or self.beat_s is not None))

    def flush_soon(self, conn: Any, queue: str, degraded: int) -> None:
        """``flush`` in the background (a task of the running loop), so a beat or a claim
        never waits on a metrics round trip; one flush in flight at a time."""
        if self._flushing is not None and not self._flushing.done():
            return
        self._flushing = asyncio.ensure_future(self.flush(conn, queue, degraded))

    async def flush(self, conn: Any, queue: str, degraded: int) -> None:
        """Send what was gathered (one ``observe``); on failure it is dropped, never
        retried in a loop: metrics must not add load to a struggling server."""
        durations, self.durations = self.durations, []
        completed, failed, self.completed, self.failed = self.completed, self.failed, 0, 0
        beat, self.beat_s = self.beat_s, None
        self.last_flush = time.monotonic()
        try:
            await metrics.observe(conn, queue, durations, completed=completed,
                                  failed=failed, beat_s=beat, degraded=degraded)
        except Exception:
            return
