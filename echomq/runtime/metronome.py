"""The Metronome: one reap + promote per beat per queue for a whole pool of consumers.

A lone Consumer runs its own recovery leg (reap expired leases), then promote, then its
claims, every beat. A pool of N consumers doing that would reap and promote N times a beat;
in pool mode the consumers skip those legs and one Metronome runs them once a beat per
queue. Across processes the Metronomes elect, per queue, by a short SERVER-side lease: the
key ``emq:{q}:metronome`` holds the owner's token with ``PX`` = two beats, renewed each
beat by its holder (the ``metronome`` script renews only if it is still the owner). A
holder that dies stops renewing; the key lapses two beats after its last renewal and the
next contender's beat takes it, so the legs miss at most two beats.

Promote and reap are idempotent, so a brief overlap during a handover (a paused holder
whose lease lapsed) costs a redundant pass, never a wrong one.

Each queue degrades on its own: a queue whose beat fails (its primary is down, failing
over, or answers an error) sleeps on the exponential curve over the beat, indexed by its
own streak of degraded beats, while the other queues keep their beat; on Valkey Cluster a
primary that fails over stalls its own queues' promote and reap, not every queue's.

Between beats the Metronome wakes at the earliest run-at it read. A run-at admitted ahead
of that instant leaves a due token (``emq:{q}:due``) that one of the pool's idle consumers
pops and hands over (``lead(queue)``, the worker wires it): the Metronome re-reads that
queue's head and re-plans its wake, and promotes the queue then even where another process
holds its lease (that holder never heard of the token; a redundant promote is harmless).

A worker's Metronome surveys (``survey=True``, ``runtime.survey``): once a second one
script call says which of its queues have something leased, due, to carry or to trim, and
only those are held and beaten; an idle queue costs a share of that one call.

Clocks: the beat is paced on the HOST monotonic clock; the lease, reap and promote read the
SERVER clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from echomq.core import errors, keyspace, words
from echomq.core import guards as guard
from echomq.core.steps import Eval, Verb, single, verb
from echomq.runtime.beat import (
    DEFAULT_BEAT_MS,
    LegCounts,
    Legs,
    default_owner,
    degraded_ms,
    promote_due,
    run_legs,
    wake_delay,
)
from echomq.runtime.meter import Meter
from echomq.runtime.survey import Watch, survey
from echomq.runtime.weather import Weather
from echomq.verbs import jobs, retention

log = logging.getLogger("echomq.metronome")

@verb
def hold(queue: str, owner: str, lease_ms: int, release: bool = False) -> Verb[int]:
    """Take or renew (or release) ``queue``'s metronome lease for ``owner``.

    For a hold: 1 renewed, 2 acquired, 0 held by someone else. For a release: 1 or 0.
    The lease expires on the SERVER clock.
    """
    guard.string("owner", owner)
    guard.span("lease_ms", lease_ms, minimum=1)
    step = Eval(
        "metronome",
        (keyspace.queue_key(queue, "metronome"),),
        (owner, str(lease_ms), "release" if release else "hold"),
    )
    return single(step, int)


@dataclass(slots=True)
class MetronomeStats:
    beats: int = 0
    passes: dict[str, int] = field(default_factory=dict)
    reaped: int = 0
    promoted: int = 0
    trimmed: int = 0
    degraded_sleeps: list[int] = field(default_factory=list)


class Metronome:
    """Runs the recovery legs once per beat per queue across every process that runs one.

    ``run(stop)`` beats until ``stop`` is set, then releases the leases it holds.
    ``on_pass(queue, counts)`` is called after each pass this Metronome ran;
    ``on_due(queue, ms)`` after each promote with ``jobs.next_due_ms`` (a worker hands it
    to its consumers, so they wake for a due instant rather than at their next beat).
    """

    def __init__(
        self,
        conn: Any,
        queues: Sequence[str],
        *,
        beat_ms: int = DEFAULT_BEAT_MS,
        owner: str | None = None,
        legs: Legs | None = None,
        legs_for: dict[str, Legs] | None = None,
        on_pass: Callable[[str, LegCounts], None] | None = None,
        on_due: Callable[[str, int | None], None] | None = None,
        weather: Weather | None = None,
        survey: bool = False,
    ) -> None:
        for q in queues:
            keyspace.validate_queue(q)
        self.conn = conn
        self.queues = list(dict.fromkeys(queues))
        self.beat_ms = guard.span("beat_ms", beat_ms, minimum=1)
        self.lease_ms = 2 * beat_ms
        self.owner = owner or default_owner()
        self.legs = legs or Legs()
        self.legs_for = dict(legs_for or {})
        self.on_pass = on_pass
        self.on_due = on_due
        #: where an outage is logged (once per outage: ``runtime.weather``)
        self.weather = weather if weather is not None else Weather("metronome")
        self._ever_held: set[str] = set()  # queues this metronome has held at some time
        self._taken: list[str] = []  # first held this beat: one log line for them all
        self._backs_at: dict[str, int] = {}  # the weather's ``backs`` when a queue degraded
        self.stats = MetronomeStats(passes={q: 0 for q in self.queues})
        self.held: set[str] = set()
        # each held queue's next due instant, on the loop's (HOST monotonic) clock, from the
        # SERVER-clock span read after its promote: spans read at different times compare
        self._due: dict[str, float] = {}
        self.meters: dict[str, Meter] = {}
        self._led: set[str] = set()  # queues whose schedule has a new head to re-read
        self._chase: set[str] = set()  # queues not held whose new head this one promotes
        self._woken = asyncio.Event()
        #: per degraded queue: its streak of failed beats and when (loop clock) to try again
        self._degraded: dict[str, tuple[int, float]] = {}
        #: ``survey=True``: beat only the queues a survey finds not quiet (``runtime.survey``)
        self.watch = Watch(self.beat_ms / 1000) if survey else None
        self._surveys = 0

    def _note(self, queue: str, ms: int | None) -> None:
        if ms is None:
            self._due.pop(queue, None)
        else:
            self._due[queue] = asyncio.get_running_loop().time() + ms / 1000

    def _soonest(self) -> int | None:
        """ms from now to the earliest noted due instant, or None."""
        if not self._due:
            return None
        return round((min(self._due.values()) - asyncio.get_running_loop().time()) * 1000)

    def lead(self, queue: str) -> None:
        """A run-at now leads ``queue``'s schedule (a consumer popped its due token):
        re-read its head and re-plan the wake (at once, from a sleep)."""
        if queue in self.queues:
            self._led.add(queue)
            self._woken.set()

    def touch(self, queue: str) -> None:
        """A consumer of this process claimed from ``queue`` (``survey=True``): beat it
        until a survey finds it quiet, so its leases, flow completions and retries are
        watched from the first claim on."""
        if self.watch is not None and queue in self.stats.passes:
            self.watch.busy.add(queue)

    async def _replan(self) -> None:
        """Re-read the head of every led queue (SERVER clock); a queue this Metronome does
        not hold is promoted at its due wake all the same (see the module docstring)."""
        led, self._led = self._led, set()
        for q in led:
            ms = await jobs.next_due_ms(self.conn, q)
            self._note(q, ms)
            if q not in self.held and ms is not None:
                self._chase.add(q)
            if self.on_due is not None:
                self.on_due(q, ms)

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> bool:
        """Sleep ``seconds`` (HOST monotonic), or until stop; True when woken by ``lead``."""
        if not self._woken.is_set() and seconds > 0:
            waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._woken.wait())}
            _done, pending = await asyncio.wait(waits, timeout=seconds,
                                                return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
        if self._woken.is_set() and not stop.is_set():
            self._woken.clear()
            return True
        return False

    def _resting(self, queue: str) -> bool:
        """Whether ``queue`` is degraded and its next try is still ahead (a loop that had
        failed and got through since, on the weather, ends the rest: the server is back)."""
        down = self._degraded.get(queue)
        if down is None or self.weather.backs > self._backs_at.get(queue, 0):
            return False
        return asyncio.get_running_loop().time() < down[1]

    def _degrade(self, queue: str, exc: BaseException) -> None:
        """``queue``'s beat failed: it rests on the exponential curve over the beat, by its
        own streak; the other queues keep their beat."""
        streak = self._degraded.get(queue, (0, 0.0))[0] + 1
        ms = degraded_ms(self.beat_ms, streak)
        self._degraded[queue] = (streak, asyncio.get_running_loop().time() + ms / 1000)
        self.stats.degraded_sleeps.append(ms)
        self.held.discard(queue)
        self._due.pop(queue, None)
        self._backs_at[queue] = self.weather.backs
        self.weather.failed(f"metronome {queue}", exc, ms)

    def _recovered(self, queue: str) -> None:
        down = self._degraded.pop(queue, None)
        if down is not None:
            self._backs_at.pop(queue, None)
            self.weather.answered(f"metronome {queue}")

    async def promote_held(self) -> None:
        """Between beats, at a due run-at: promote (only) the queues whose lease is held,
        and a chased queue (led here, held elsewhere) once its led run-at is due, once."""
        now = asyncio.get_running_loop().time()
        ripe = {q for q in self._chase if self._due.get(q, now) <= now + 0.005}
        self._chase -= ripe
        self._due = {q: at for q, at in self._due.items() if q in self._chase}
        for q in list(self.held | ripe):
            if self._resting(q):
                continue
            try:
                counts = await promote_due(self.conn, q, self.legs_for.get(q, self.legs),
                                           LegCounts())
            except (errors.WireError, errors.CommandError) as exc:
                self._degrade(q, exc)
                continue
            self._recovered(q)
            self.stats.promoted += counts.promoted
            if q in self.held:  # a chased queue is let go: its holder plans the rest
                self._note(q, counts.next_due_ms)
            elif self.watch is not None and counts.next_due_ms is not None:
                # surveying, a queue quiet at the last survey may have no holder yet: this
                # one follows its next instant (a wait's deadline after a run-at) until a
                # tick beats it
                self._chase.add(q)
                self._note(q, counts.next_due_ms)
            if self.on_due is not None:
                if not counts.promoted:
                    # the instant was no run-at (a pause's end, a group reopening): no
                    # promote left a wake token, so the consumers hear it is due now
                    self.on_due(q, 0)
                self.on_due(q, counts.next_due_ms)

    async def tick(self) -> None:
        """One beat: for each queue, hold the lease and, if held, run its legs. A queue
        whose beat fails degrades alone (``_degrade``); the rest beat on."""
        self.stats.beats += 1
        # a queue chased for a lead keeps its instant: its holder elsewhere never heard of it
        self._due = {q: at for q, at in self._due.items() if q in self._chase}
        fresh = len(self._taken)
        queues = self.queues
        if self.watch is not None:
            queues = await self._watched()
        for q in queues:
            if self._resting(q):
                continue
            try:
                await self._beat(q)
            except (errors.WireError, errors.CommandError) as exc:
                # an error reply (LOADING, READONLY, OOM, CLUSTERDOWN) is weather too
                self._degrade(q, exc)
            else:
                self._recovered(q)
        if len(self._taken) > fresh:
            self._say_taken()

    async def _watched(self) -> list[str]:
        """The queues to beat now (``survey=True``): a survey once a second (one call, or
        one per queue on a cluster), then those it found busy or due within a beat. A
        queue that left them is no longer held here (its lease lapses in two beats);
        ready ones kick the idle consumers (``on_due(q, 0)``); kept terminal rows are
        trimmed every ``trim_every`` surveys."""
        watch = self.watch
        assert watch is not None
        if watch.due():
            self._surveys += 1
            trim = (self._surveys - 1) % max(1, self.legs.trim_every) == 0
            if self.conn.cluster:
                parts = await asyncio.gather(*(survey(self.conn, [q], watch.horizon_ms, trim)
                                               for q in self.queues))
                found = [s for part in parts for s in part]
            else:
                found = await survey(self.conn, self.queues, watch.horizon_ms, trim)
            watch.found(found)
            if self.on_due is not None:
                for q in watch.ready:
                    self.on_due(q, 0)
            for q in watch.trim - watch.busy:
                self.stats.trimmed += await retention.apply(
                    self.conn, q, self.legs_for.get(q, self.legs).retention)
        queues = watch.beating()
        for q in self.held - watch.busy:  # gone quiet: its last beat time is told now
            meter = self.meters.get(q)
            if meter is not None and meter.beat_s is not None:
                meter.flush_soon(self.conn, q, 0)
        self.held &= watch.busy
        return queues

    def _say_taken(self) -> None:
        """One line for the queues whose lease this metronome took for the first time
        this beat (a worker on 1,000 queues says so once, naming a few)."""
        taken, self._taken = self._taken, []
        log.info("metronome %s holds %d queue%s: %s", self.owner, len(taken),
                 "s" if len(taken) != 1 else "", words.few(taken))

    async def _beat(self, q: str) -> None:
        """``q``'s part of a beat: hold its lease and, if held, run its legs."""
        got = await hold(self.conn, q, self.owner, self.lease_ms)
        if not got:
            if q in self.held:
                log.info("metronome %s lost the lease on %s", self.owner, q)
            self.held.discard(q)
            return
        if q not in self.held:
            # once at INFO; a lease taken back after an outage is the outage's story, which
            # the weather tells in one line
            if q in self._ever_held:
                log.debug("metronome %s holds %s", self.owner, q)
            else:
                self._taken.append(q)  # said in one line at the end of the beat
            self._ever_held.add(q)
            self.held.add(q)
        began = time.monotonic()
        counts = await run_legs(self.conn, q, self.legs_for.get(q, self.legs),
                                self.stats.beats)
        # a queue's first beat is told at once (a queue beaten only now and then would
        # otherwise never reach a second between beats)
        meter = self.meters.setdefault(q, Meter(last_flush=0.0))
        meter.beat_s = time.monotonic() - began
        if meter.due():  # the beat time, folded into the server's metrics once a second
            meter.flush_soon(self.conn, q, 0)
        self.stats.passes[q] = self.stats.passes.get(q, 0) + 1
        self.stats.reaped += counts.reaped
        self.stats.promoted += counts.promoted
        self.stats.trimmed += counts.trimmed
        self._note(q, counts.next_due_ms)
        if self.on_due is not None:
            self.on_due(q, counts.next_due_ms)
        if self.on_pass is not None:
            self.on_pass(q, counts)

    async def run(self, stop: asyncio.Event) -> None:
        """Beat until ``stop`` is set. A wire error (or an error reply) does not end the
        loop: a queue's own failure degrades that queue alone (``tick``); one outside every
        queue's beat sleeps the whole loop on the exponential curve over the beat, indexed
        by the streak of degraded beats."""
        loop = asyncio.get_running_loop()
        beat_s = self.beat_ms / 1000
        streak = 0
        next_at = loop.time()
        due_wake = False
        while not stop.is_set():
            try:
                if due_wake:
                    await self.promote_held()
                else:
                    await self.tick()
            except (errors.WireError, errors.CommandError) as exc:
                # an error reply (LOADING, READONLY, OOM) is weather too, not a reason to
                # leave the pool without its beat
                streak += 1
                ms = degraded_ms(self.beat_ms, streak)
                self.stats.degraded_sleeps.append(ms)
                self.held.clear()
                self.weather.failed("metronome", exc, ms)
                await self.weather.pause(ms / 1000, stop)
                next_at = loop.time()
                continue
            if streak:
                self.weather.answered("metronome")
                streak = 0
            if not due_wake:
                next_at += beat_s
                if next_at < loop.time():  # a slow beat: no catching up with a burst
                    next_at = loop.time()
            delay, due_wake = wake_delay(next_at - loop.time(), self._soonest())
            try:
                while await self._sleep(stop, delay):  # a new head: re-read, re-plan
                    await self._replan()
                    delay, due_wake = wake_delay(next_at - loop.time(), self._soonest())
            except (errors.WireError, errors.CommandError) as exc:
                self.weather.failed("metronome", exc)
                next_at, due_wake = loop.time(), False
        await self.release()

    async def release(self) -> None:
        """Give back every lease held, so a peer takes over on its next beat."""
        for q in list(self.held):
            try:
                await hold(self.conn, q, self.owner, self.lease_ms, release=True)
            except errors.EchoMQError as exc:
                log.debug("metronome release of %s failed: %s", q, exc)
        self.held.clear()
