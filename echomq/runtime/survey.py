"""Which of a Metronome's queues need a beat: one survey a second instead of legs per queue.

A worker's Metronome used to hold each queue's lease and run its legs (reap, promote, the
next-due read, the flow turn) every beat, idle or not: five round trips per queue per beat,
10,000 commands a second for 100 idle queues. With ``survey=True`` it reads once a second
(``SURVEY_EVERY_S``), in one ``survey`` script call for all its queues (one per queue on a
cluster, whose queues live on several slots), which of them have something to do, and
beats only those:

- ``BEAT``: something leased (a holder may die: its lease is watched and reaped), a
  run-at or deadline within the horizon (the survey period and two beats), a flow to
  carry or roll back, a group or the queue blocked or paused until an instant, jobs ready
  under a queue rate (its window reopens at an instant the legs read). Those queues get
  the full beat (lease, legs, due wakes) until a survey finds them quiet.
- ``READY``: jobs to claim; the worker's idle consumers of that queue are kicked (a
  backstop: an admission's wake token already woke them).
- ``TRIM``: terminal rows the retention keeps: a trim pass, once a survey.
- a due instant past the horizon: the queue is beaten from a beat before that instant.

Why a survey and not a server-side index of next-due per node: an index must be kept by
every transition that leases, schedules, parks or carries (a dozen scripts and their native
twins, shared with other work) and cannot span a cluster's slots; the survey reads what
those transitions already write, costs O(1) reads per queue once a second (about 1 ms of
server time per 1,000 queues), and a run-at admitted between surveys ahead of the head
leaves its due token, which the idle consumers' wait hands to the Metronome at once
(``Metronome.lead``), so nothing scheduled waits for the next survey.

Clocks: the survey's instants are SERVER-clock spans; when to survey and the planned
instants are on the HOST monotonic clock (the event loop's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, single, verb

#: a survey's bits (see the script's header)
BEAT, READY, TRIM = 1, 2, 4
#: how often (s) a surveying Metronome reads which queues need a beat
SURVEY_EVERY_S = 1.0


class Surveyed(NamedTuple):
    """A queue that is not quiet: its ``mask`` (``BEAT | READY | TRIM``) and the ms from
    SERVER now to its next run-at or deadline (None: none)."""

    queue: str
    mask: int
    due_ms: int | None


@verb
def survey(queues: Sequence[str], horizon_ms: int, trims: bool) -> Verb[list[Surveyed]]:
    """Which of ``queues`` (all on one slot, or off a cluster any) are not quiet, in one
    script call; ``trims``: read the terminal sets too (a retention keeps rows). SERVER
    clock."""
    names = list(queues)
    step = Eval("survey", (keyspace.queue_key(names[0], "metronome"),),
                (str(int(horizon_ms)), "1" if trims else "0",
                 *(keyspace.base(q) for q in names)))

    def decode(reply: Any) -> list[Surveyed]:
        flat = [int(v) for v in reply or ()]
        return [Surveyed(names[flat[i] - 1], flat[i + 1],
                         flat[i + 2] if flat[i + 2] >= 0 else None)
                for i in range(0, len(flat), 3)]

    return single(step, decode)


class Watch:
    """What the last survey found, and which queues beat now (HOST monotonic clock)."""

    def __init__(self, beat_s: float) -> None:
        self.beat_s = beat_s
        self.next_at = 0.0  # when to survey (loop clock): at once at the start
        self.busy: set[str] = set()
        self.trim: set[str] = set()
        self.ready: set[str] = set()
        #: queues quiet now with a run-at or deadline past the horizon: when (loop clock)
        self.planned: dict[str, float] = {}

    @property
    def horizon_ms(self) -> int:
        return round((SURVEY_EVERY_S + 2 * self.beat_s) * 1000)

    def due(self) -> bool:
        return asyncio.get_running_loop().time() >= self.next_at

    def found(self, got: list[Surveyed]) -> None:
        """Take a survey's findings: the busy, ready and trimmed queues, the planned
        instants."""
        now = asyncio.get_running_loop().time()
        self.next_at = now + SURVEY_EVERY_S
        self.busy = {s.queue for s in got if s.mask & BEAT}
        self.ready = {s.queue for s in got if s.mask & READY}
        self.trim = {s.queue for s in got if s.mask & TRIM}
        self.planned = {s.queue: now + s.due_ms / 1000 for s in got
                        if not s.mask & BEAT and s.due_ms is not None}

    def beating(self) -> list[str]:
        """The queues that beat now: the busy ones, and those whose planned instant comes
        within a beat (they stay busy until the next survey)."""
        soon = asyncio.get_running_loop().time() + self.beat_s
        for q in [q for q, at in self.planned.items() if at <= soon]:
            del self.planned[q]
            self.busy.add(q)
        return sorted(self.busy)
