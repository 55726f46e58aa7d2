"""The beat: what every paced loop shares (the recovery legs, the wake, the degraded curve).

The Consumer (lone mode), the Metronome (pool mode) and the Pump each run a loop paced by a
beat. What such a loop does on a beat, and how it sleeps, is written here once:

- the legs: ``run_legs`` reaps expired leases, promotes until nothing due is left
  (``promote_due``, batch by batch via ``promote_once``, then the deadline sweep when a
  deadline has passed), carries flow completions
  (``carry_flows``: one elected carrier per queue, so a worker without a Pump, or a lone
  Consumer, still releases flow parents, and uncommitted flow admissions are rolled back)
  and now and then trims the terminal sets under the retention policy;
- the wake: ``wake_delay`` wakes a loop at a due run-at that falls before its next beat,
  rather than a beat later;
- the degraded curve: ``degraded_ms`` is an exponential sleep over the beat,
  indexed by the streak of degraded beats, capped at 30 s (or the beat, if longer).

Clocks: the beat and every sleep are paced on the HOST monotonic clock; reap, promote, the
carrier lease and trim read the SERVER clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from echomq.core import backoff, errors, words
from echomq.core.steps import Verb, verb
from echomq.runtime.route import task_name
from echomq.verbs import flows, jobs, retention, workers
from echomq.verbs.jobs.claims import reap_ids

DEFAULT_BEAT_MS = 100
DEFAULT_BATCH = 1000
TRIM_EVERY_BEATS = 10
# promote batches per pass while a backlog is due: a burst of 20k jobs due at one instant
# is released in one beat, yet one pass never holds the loop for long
PROMOTE_PASSES = 20
# the first batch of a pass is small, so the first released jobs are claimable (and their
# wake token pushed) within a millisecond instead of after a 1,000-row promote
FIRST_BATCH = 100
# the flow-carrier lease: three default beats, so a beating holder keeps it and a dead
# one's queue is carried by another within it
CARRY_LEASE_MS = 3 * DEFAULT_BEAT_MS
# outbox reads per carry pass (each CARRY_BATCH entries)
CARRY_PASSES = 20

log = logging.getLogger("echomq.beat")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Legs:
    """What a recovery beat does for one queue: batch sizes, stall threshold, retention."""

    reap_batch: int = DEFAULT_BATCH
    promote_batch: int = DEFAULT_BATCH
    max_stalled: int = jobs.DEFAULT_MAX_STALLED
    retention: retention.Retention = retention.DEFAULT
    trim_every: int = TRIM_EVERY_BEATS
    promote_passes: int = PROMOTE_PASSES
    first_batch: int = FIRST_BATCH
    carry: bool = True
    carry_lease_ms: int = CARRY_LEASE_MS


@dataclass(slots=True)
class LegCounts:
    reaped: int = 0
    promoted: int = 0
    trimmed: int = 0
    carried: int = 0  # flow children newly counted at their parents
    expired: int = 0  # waiting jobs ended at their deadline by the sweep
    #: ms from SERVER now to the next scheduled run-at after this pass (None: none)
    next_due_ms: int | None = None


@verb
def promote_once(queue: str, batch: int) -> Verb[int]:
    """One promote call that never sticks: at wire 6 the native promote refuses a due
    grouped row (it knows no lanes), and then the script, which routes it to its lane,
    runs that batch instead. SERVER clock."""
    first = jobs.promote.steps(queue, batch)
    try:
        return int((yield from first))
    except errors.StateError:
        return int((yield from jobs.promote.steps(queue, batch, native=False)))


async def promote_due(conn: Any, queue: str, legs: Legs, out: LegCounts) -> LegCounts:
    """Promote until nothing due is left (at most ``promote_passes`` batches), then read how
    long until the next run-at, and when that read shows a deadline passed, run the
    deadline sweep (``expire``: waiting jobs nothing pops end ``expired``). SERVER clock."""
    batch = min(legs.first_batch, legs.promote_batch) or legs.promote_batch
    for i in range(max(1, legs.promote_passes)):
        n = await promote_once(conn, queue, batch)
        out.promoted += n
        if n < batch:
            break
        if i == 0:
            # let the claims the first batch woke reach the server ahead of the big batches
            await asyncio.sleep(0.001)
        batch = legs.promote_batch
    due = await jobs.next_due(conn, queue)
    out.next_due_ms = due.ms
    if due.deadline_ms is not None and due.deadline_ms <= 0:
        for _ in range(max(1, legs.promote_passes)):
            n = await jobs.expire(conn, queue, legs.promote_batch)
            out.expired += n
            if n < legs.promote_batch:
                break
        # the next due instant once the sweep moved its deadlines (a wait timed out)
        out.next_due_ms = (await jobs.next_due(conn, queue)).ms
        if out.expired:
            log.info("expired %d job%s on %s: past %s deadline (not started by its "
                     "expires=, or a wait timed out)", out.expired,
                     "s" if out.expired != 1 else "", queue,
                     "their" if out.expired != 1 else "its")
    return out


async def carry_outbox(conn: Any, queue: str, batch: int = flows.CARRY_BATCH,
                       passes: int = CARRY_PASSES) -> int:
    """Carry ``queue``'s flow outbox to the parents' slots until it is empty (at most
    ``passes`` reads of ``batch``); the count of children newly counted. A carry the
    server refuses is logged and left in the outbox for the next pass."""
    total = 0
    for _ in range(max(1, passes)):
        got = await flows.carry(conn, queue, batch)
        total += got.counted
        if got.refused:
            log.error("%d flow completions of %s refused by the server (kept in its "
                      "outbox, tried again next beat)", got.refused, queue)
            break
        if got.read < batch:
            break
    return total


async def carry_flows(conn: Any, queue: str, owner: str, lease_ms: int = CARRY_LEASE_MS,
                      batch: int = flows.CARRY_BATCH, passes: int = CARRY_PASSES) -> int:
    """The flow-completions leg for ``queue``: one round trip (``flows.turn``) takes or
    renews the queue's flow-carrier lease for ``owner`` and, only while held, rolls back
    the uncommitted admissions past their deadline and carries the outbox. Any number of
    loops may run it at once: one carries, and a carry counts each child once anyway.
    The count of children newly counted. SERVER clock (the lease, the deadlines)."""
    got = await flows.turn(conn, queue, owner, lease_ms)
    if not got.held:
        return 0
    for root in got.stale:
        outcome = await flows.roll_back(conn, queue, root)
        log.warning("flow %s on %s rolled back: its admission was not committed by its "
                    "deadline (%s)", root, queue, outcome)
    return await carry_outbox(conn, queue, batch, passes) if got.outbox else 0


async def run_legs(conn: Any, queue: str, legs: Legs, beat_no: int) -> LegCounts:
    """One recovery beat for ``queue``: reap, then promote (looping while a backlog is
    due), then carry flow completions (``carry_flows``, unless ``legs.carry`` is off),
    then (every ``trim_every`` beats) a bounded retention trim. SERVER clock
    throughout."""
    out = LegCounts()
    reaped = await reap_ids(conn, queue, legs.reap_batch, legs.max_stalled)
    out.reaped = len(reaped)
    if reaped:
        await say_reaped(conn, queue, reaped)
    await promote_due(conn, queue, legs, out)
    if legs.carry:
        out.carried = await carry_flows(conn, queue, OWNER, legs.carry_lease_ms)
    if legs.trim_every and beat_no % legs.trim_every == 0:
        out.trimmed = await retention.apply(conn, queue, legs.retention)
    return out


async def say_reaped(conn: Any, queue: str, reaped: list[str]) -> None:
    """One WARNING for a reap: how many, and the first few by id, task and the worker that
    held each when a live worker's running list still names it (a hung one). Reads the
    rows and the live workers only then (a reap is rare)."""
    holders: dict[str, str] = {}
    with contextlib.suppress(errors.EchoMQError):  # a read-only ACL user: no holders
        holders = {r.id: w.id for w in await workers.live(conn, queue=queue, sweep=False)
                   for r in w.busy}
    named = []
    for job_id in reaped[:words.SHOWN]:
        row = await jobs.get(conn, queue, job_id)
        task = task_name(row["payload"]) if row and row.get("payload") else "?"
        held = f", held by {holders[job_id]}" if job_id in holders else ""
        named.append(f"{job_id} ({task}{held})")
    n = len(reaped)
    log.warning("reaped %d stalled job%s on %s: %s; %s lease lapsed with no worker renewing "
                "it: back to pending (dead past max_stalled)", n, "s" if n != 1 else "",
                queue, words.few(named + ["?"] * (n - len(named))),
                "their" if n != 1 else "its")


def wake_delay(until_beat: float, next_due_ms: int | None) -> tuple[float, bool]:
    """How long a beat loop sleeps (HOST seconds), and whether it wakes for a due run-at
    rather than for its next beat. A run-at before the next beat wakes the loop at that
    instant (+1 ms, so the SERVER clock has passed it), not a beat later."""
    if next_due_ms is not None and next_due_ms / 1000 < until_beat:
        return max(0.001, (next_due_ms + 1) / 1000), True
    return max(0.0, until_beat), False


def default_owner() -> str:
    """A token naming this process (host, pid) plus randomness, unique per loop: the
    owner a leased loop (a Metronome, a Pump) writes on the leases it holds."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


#: the owner this process's beats write on the flow-carrier leases they hold
OWNER = default_owner()


#: the degraded curve's ceiling: a loop that cannot reach the server retries at most this
#: far apart (or one beat apart, if its beat is longer)
DEGRADED_CEILING_MS = 30_000


def degraded_ms(beat_ms: int, streak: int) -> int:
    """How long (HOST ms) a loop sleeps after its ``streak``-th degraded beat in a row: the
    exponential curve over the beat, capped at ``DEGRADED_CEILING_MS``."""
    return backoff.delay_ms(("exponential", beat_ms, max(DEGRADED_CEILING_MS, beat_ms)),
                            streak)


async def unless_stopped(stop: asyncio.Event, call: Awaitable[T]) -> T | None:
    """``call``'s result, or None when ``stop`` is set first (``call`` is then cancelled,
    and a wire error it ends with meanwhile is dropped: the loop is stopping)."""
    pop = asyncio.ensure_future(call)
    ended = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({pop, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        if not pop.done():
            pop.cancel()
            with contextlib.suppress(asyncio.CancelledError, errors.EchoMQError):
                await pop
    return None if pop.cancelled() else pop.result()


async def sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds`` (HOST monotonic) or until ``stop`` is set, whichever is first."""
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
