"""Which of a consumer's queues have work, and which one the next claim asks.

A consumer of a partitioned queue (``mail#0`` ... ``mail#7``) has one slot pool and one
claim loop for all its partitions. The partitions that have work take turns, a time slice
each (a fifth of a beat): every claim in a partition's slice asks it for all the free
slots, so a claim is as large as a lone queue's and the jobs that finish together mostly
share one partition (one batch of acks): about the server work per job of one partition,
where equal shares of every claim cost each partition's script its fixed price per call
(1.4x the work per job at 3 partitions). A partition that gave fewer
jobs than it was asked for is empty for now and skipped (the claim loop asks the next one
at once for the rest), until its wake list says it has work again or the next probe: once
a beat every partition is asked again, so work that arrived unannounced (its wake token
taken by another worker) waits at most a beat. With one queue the claim asks it for the
whole count, every time: the plain consumer's behaviour.

Clocks: the probe cadence is the HOST monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence


class Spread:
    """The queues of one consumer, which of them have work, and the turn."""

    __slots__ = ("_probed", "_slice_end", "_turn", "probe_s", "queues", "ready", "slice_s")

    def __init__(self, queues: Sequence[str], probe_s: float,
                 slice_s: float | None = None) -> None:
        self.queues = list(queues)
        self.probe_s = probe_s
        self.slice_s = probe_s / 5 if slice_s is None else slice_s
        self.ready = set(self.queues)
        self._turn = 0
        self._probed = time.monotonic()
        self._slice_end = 0.0

    @property
    def single(self) -> bool:
        return len(self.queues) == 1

    def split(self, n: int) -> dict[str, int]:
        """``{queue: n}`` for the queue whose turn it is among those that have work (all of
        them at a probe): the same one until its slice ends or it runs dry, then the next;
        empty when ``n`` is 0 or no queue has work."""
        if n <= 0:
            return {}
        queues = self.queues
        if len(queues) == 1:
            return {queues[0]: n}
        now = time.monotonic()
        if now - self._probed >= self.probe_s:
            self._probed = now
            self.ready.update(queues)
        current = queues[self._turn]
        if now < self._slice_end and current in self.ready:
            return {current: n}
        count = len(queues)
        for i in range(1, count + 1):
            q = queues[(self._turn + i) % count]
            if q in self.ready:
                self._turn = (self._turn + i) % count
                self._slice_end = now + self.slice_s
                return {q: n}
        return {}

    def claimed(self, queue: str, asked: int, got: int) -> None:
        """A claim of ``asked`` on ``queue`` gave ``got``: fewer means it is empty for now."""
        if got < asked and len(self.queues) > 1:
            self.ready.discard(queue)

    def wake(self, queue: str) -> None:
        """``queue`` has work (its wake token came)."""
        if queue in self.queues:
            self.ready.add(queue)

    def any_ready(self) -> bool:
        return bool(self.ready)
