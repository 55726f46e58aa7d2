"""One blocking wait for all of a worker's idle consumers.

Each idle consumer used to block on its own queue's wake and due lists with a one-beat
``BLPOP``: ten calls a second per queue, so 1,000 idle queues cost a core and a job
enqueued on one of them waited behind the others' wakeups. A worker's ``Waker`` blocks
once for them all: one ``BLPOP`` over the wake lists of the consumers that have a free
slot and the due lists of every queue, for as long as the socket allows. An admission's
wake token (``enqueue``, promote, reap: at most one per queue) ends it; the Waker kicks that
queue's consumer, which claims, and blocks again. A due token (a run-at now leads the
schedule) goes to ``on_lead`` (the Metronome re-plans its wake). The consumers themselves
only wait on their kick, or a noted due instant (a host timer, no call).

Why one ``BLPOP`` over the per-queue lists rather than a per-node wake list the admission
scripts push to: the lists and their tokens already exist, written by every admission
path (scripts and native), so nothing shared changes; ``BLPOP`` takes the first non-empty
list, so a token is never missed between two waits; and its cost is per call (one call
per wakeup, its keys registered once), not per queue per beat.

A consumer that is full (no free slot) leaves the wait's keys: a token that still comes
for it is put back for another worker's consumer of that queue, and the next wait is sent
without it. One that has a slot again while the wait under way does not watch it blocks on
its own lists (``want`` says so) until the next wait, sent at the next token or within a
second (``BLOCK_S``), takes it in. A wait under way is never cancelled to change its keys:
a ``BLPOP`` cancelled after the server popped a token would lose that token. On a cluster,
whose queues live on several slots, a blocking call cannot span them: there each consumer
keeps its own wait (``runtime.claimloop``).

Clocks: nothing here is timed but the degraded curve, on the HOST monotonic clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from echomq.core import errors, keyspace
from echomq.core.steps import Command, Verb, single, verb
from echomq.runtime.beat import degraded_ms, sleep_unless, unless_stopped
from echomq.runtime.metronome import Metronome

log = logging.getLogger("echomq.waker")

#: how long one wait blocks when nothing ends it (s): a consumer back from full joins the
#: next one, so this bounds its own waits; one call a second is all an idle worker sends
BLOCK_S = 1.0


@verb
def wait_tokens(keys: tuple[str, ...], seconds: float) -> Verb[str | None]:
    """Block up to ``seconds`` on ``keys`` (wake and due lists); the list a token came
    from, or None at the timeout."""
    def decode(reply: Any) -> str | None:
        if not reply:
            return None
        return reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
    return single(Command(("BLPOP", *keys, f"{seconds:.3f}")), decode)


@verb
def put_back(key: str) -> Verb[int]:
    """Leave a wake token again (one popped for a consumer with no free slot), for
    another worker's consumer of that queue."""
    return single(Command(("RPUSH", key, "1")), int)


class Waker:
    """The worker's one wait (see the module docstring). ``join`` a consumer's queues with
    its ``kick`` (called with the queue a token came for) and ``full`` (whether it has no
    free slot), then ``run(stop)``."""

    def __init__(self, conn: Any, beat_ms: int,
                 on_lead: Callable[[str], None] | None = None) -> None:
        self.conn = conn
        self.beat_ms = beat_ms
        self.on_lead = on_lead
        self._kicks: dict[str, Callable[[str], None]] = {}  # wake key -> its consumer's kick
        self._full: dict[str, Callable[[], bool]] = {}  # wake key -> whether it is full
        self._queues: dict[str, str] = {}  # wake or due key -> its queue
        self._dues: list[str] = []
        self._watching: frozenset[str] = frozenset()  # the wake keys of the wait under way
        self.calls = 0  # the waits sent (a test counts them)

    def join(self, queue: str, kick: Callable[[str], None], full: Callable[[], bool]) -> None:
        """Serve ``queue``'s consumer: ``kick(queue)`` on its wake token."""
        wake, due = keyspace.queue_key(queue, "wake"), keyspace.queue_key(queue, "due")
        self._kicks[wake] = kick
        self._full[wake] = full
        self._queues[wake] = self._queues[due] = queue
        self._dues.append(due)

    def watches(self, queue: str) -> bool:
        """Whether the wait under way watches ``queue``'s wake list (its consumer, idle
        with a free slot, rests on its kick; otherwise it blocks on its own lists until
        the next wait)."""
        return keyspace.queue_key(queue, "wake") in self._watching

    async def run(self, stop: asyncio.Event) -> None:
        """Wait, kick, wait again, until ``stop``. A failed wait sleeps on the degraded
        curve and kicks every consumer, whose claims report the weather."""
        streak = 0
        while not stop.is_set():
            wakes = tuple(k for k, full in self._full.items() if not full())
            self._watching = frozenset(wakes)
            try:
                got = await self._wait(stop, (*wakes, *self._dues))
            except (errors.WireError, errors.CommandError) as exc:
                streak += 1
                log.debug("the worker's wait failed (%s); its consumers claim to see", exc)
                self._kick_all()
                await sleep_unless(stop, degraded_ms(self.beat_ms, streak) / 1000)
                continue
            streak = 0
            if got is not None:
                await self._token(got)
        self._watching = frozenset()

    async def _wait(self, stop: asyncio.Event, keys: tuple[str, ...]) -> str | None:
        """One ``BLPOP``, ended early by ``stop`` only (then cancelled)."""
        self.calls += 1
        secs = self.conn.block_for(BLOCK_S)
        return await unless_stopped(stop, wait_tokens(self.conn, keys, secs))

    async def _token(self, key: str) -> None:
        """A token came from ``key``: kick its consumer (or put it back when that one is
        full), or hand a due token to ``on_lead``."""
        queue = self._queues.get(key)
        if queue is None:
            return
        kick = self._kicks.get(key)
        if kick is None:
            if self.on_lead is not None:
                self.on_lead(queue)
            return
        if self._full[key]():
            await put_back(self.conn, key)
        else:
            kick(queue)

    def _kick_all(self) -> None:
        for key, kick in self._kicks.items():
            kick(self._queues[key])


def pool(conn: Any, consumers: Sequence[Any], metronome: Metronome,
         beat_ms: int) -> Waker | None:
    """Wire a pool's consumers (``Consumer``) to its Metronome: the due tokens they pop
    re-plan it (``lead``) and their claims mark a queue busy (``touch``); and, off a
    cluster, to one ``Waker``, returned to be run (None on a cluster, where each consumer
    keeps its own wait)."""
    for c in consumers:
        c.on_lead = metronome.lead
        c.claims.on_claimed = metronome.touch
    if conn.cluster:
        return None
    waker = Waker(conn, beat_ms, on_lead=metronome.lead)
    for c in consumers:
        c.wait_with(waker)
    return waker
