"""The second half of a flow settlement: carrying children's ends to their parents' slots.

A child's end is written on its own slot, to its queue's flow outbox (a stream), by the
script that ends it; ``carry`` reads that outbox and runs ``@flow_carry`` on each parent's
slot, where each child is counted exactly once (see ``echomq.verbs.flows``). The same outbox
carries the ends of batch members that no worker reported (dead by the reaper, expired,
cancelled while waiting: ``includes/member.lua``), settled on their batch's slot
(``batches.settle``: a member counts once). ``turn`` is a beat's one-round-trip look at a
queue's flow chores (the carrier lease, the outbox length, the uncommitted admissions to
roll back); ``echomq.runtime.beat.carry_flows`` runs the whole leg.
``echomq.verbs.flows`` re-exports these names.

Clocks: the carrier lease and the commit deadlines are SERVER ms.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Eval, Verb, single, text, verb
from echomq.verbs import batches
from echomq.verbs.flows.trees import parse_ref

#: entries carried per outbox read
CARRY_BATCH = 500


class Carried(NamedTuple):
    """What one ``carry`` did: entries ``read``, ``counted`` (a child newly settled),
    parents ``released``, parents ``failed``, ``stale`` (already carried), ``orphans``
    (the parent row is gone), ``refused`` (entries whose carry the server refused: left
    in the outbox for the next carry) and ``members``: batch members' ends taken to their
    batches (each counted there once)."""

    read: int = 0
    counted: int = 0
    released: int = 0
    failed: int = 0
    stale: int = 0
    orphans: int = 0
    refused: int = 0
    members: int = 0

    def plus(self, other: Carried) -> Carried:
        """Both counts added up."""
        return Carried(*(a + b for a, b in zip(self, other, strict=True)))


def _fields(raw: Any) -> dict[Any, Any]:
    """An outbox entry's fields as sent (bytes keys and values: they go back out as ARGV
    unchanged, so a 10,000-child fan-in decodes nothing it does not read)."""
    if isinstance(raw, dict):
        return raw
    return dict(zip(raw[::2], raw[1::2], strict=True))


@verb
def carry(queue: str, batch: int = CARRY_BATCH) -> Verb[Carried]:
    """Carry up to ``batch`` entries of ``queue``'s flow outbox to their parents' slots.

    Reads the outbox (oldest first), runs one ``@flow_carry`` per parents' queue
    (pipelined: on a cluster each goes to its own shard), then deletes the entries it
    read. Safe to run from any number of Pumps at once and to be killed anywhere: an entry
    carried twice counts once. A carry the server refuses leaves its entries in the outbox.
    """
    guard.positive("batch", batch)
    outbox = keyspace.queue_key(queue, "flow:outbox")

    def calls() -> Verb[Carried]:
        got = (yield Command(("XRANGE", outbox, "-", "+", "COUNT", batch))) or []
        if not got:
            return Carried()
        head = keyspace.job_key(queue, "").encode()
        parents: dict[Any, tuple[str, str]] = {}  # a fan-in names one parent many times
        by_queue: dict[str, list[tuple[Any, list[Any]]]] = defaultdict(list)
        members: dict[str, list[tuple[Any, tuple[str, str]]]] = defaultdict(list)
        for eid, raw in got:
            f = _fields(raw)
            if b"batch" in f:  # a batch member's end (includes/member.lua)
                members[text(f[b"batch"])].append((eid, (text(f[b"child"]), text(f[b"how"]))))
                continue
            parent = f[b"parent"]
            if parent not in parents:
                parents[parent] = parse_ref(text(parent))
            pq, pid = parents[parent]
            child = f[b"child"]
            ref = head + (child if isinstance(child, bytes) else str(child).encode())
            by_queue[pq].append((eid, [pid, ref, f[b"seq"], f[b"how"],
                                       f.get(b"policy", b"fail"),
                                       f.get(b"result", b""), f.get(b"error", b"")]))
        plan = [(pq, items) for pq, items in by_queue.items()]
        steps = tuple(
            Eval("flow_carry", (keyspace.queue_key(pq, "waiting-children"),),
                 (keyspace.base(pq), *(v for _, argv in items for v in argv)))
            for pq, items in plan
        )
        replies = (yield Batch(steps)) if steps else []
        done: list[Any] = []
        for bid, ends in members.items():
            try:
                yield from batches.settle.steps(bid, [end for _, end in ends])
            except errors.ServerError:
                continue  # left in the outbox for the next carry
            done += [eid for eid, _ in ends]
        codes: list[int] = []
        refused = 0
        for (_, items), reply in zip(plan, replies, strict=True):
            if isinstance(reply, errors.ServerError):
                refused += len(items)  # left in the outbox; the next carry tries again
                continue
            done += [eid for eid, _ in items]
            codes += [int(c) for c in reply]
        if done:
            yield Command(("XDEL", outbox, *done))
        return Carried(
            read=len(got),
            counted=sum(1 for c in codes if c in (1, 2, 4)),
            released=codes.count(2),
            failed=codes.count(4),
            stale=codes.count(0),
            orphans=codes.count(3),
            refused=refused,
            members=sum(map(len, members.values())),
        )

    return calls()


@verb
def hold_carrier(queue: str, owner: str, lease_ms: int) -> Verb[bool]:
    """Take or renew ``queue``'s flow-carrier lease (``emq:{q}:flow:carrier``) for
    ``owner``: ``True`` if ``owner`` holds it now. Pumps that elect (a worker's do) carry a
    queue only while they hold it, so a fleet carries each entry once; the lease expires on
    the SERVER clock, so a dead holder's queue is taken over within ``lease_ms``. The same
    script as the Metronome's lease."""
    guard.string("owner", owner)
    guard.span("lease_ms", lease_ms, minimum=1)
    step = Eval("metronome", (keyspace.queue_key(queue, "flow:carrier"),),
                (owner, str(lease_ms), "hold"))
    return single(step, lambda r: int(r) > 0)


@verb
def outbox_size(queue: str) -> Verb[int]:
    """How many settled flow children of ``queue`` wait to be carried (``XLEN``)."""
    return single(Command(("XLEN", keyspace.queue_key(queue, "flow:outbox"))), int)


class Turn(NamedTuple):
    """What ``turn`` found: ``held`` the carrier lease (if not, another carrier has the
    queue and the rest is empty), ``outbox`` entries waiting to be carried, and the
    ``stale`` roots of uncommitted admissions to roll back."""

    held: bool
    outbox: int
    stale: tuple[str, ...]


@verb
def turn(queue: str, owner: str, lease_ms: int, limit: int = 100,
         retry_ms: int = 5_000) -> Verb[Turn]:
    """One beat's turn at ``queue``'s flow chores, in one round trip (``@flow_turn``): take
    or renew the flow-carrier lease for ``owner`` (``lease_ms``, SERVER clock) and, when
    held, read the outbox length and hand out up to ``limit`` roots whose admission was not
    committed by its deadline (each then owned by this caller for ``retry_ms``: if it dies
    before ``roll_back``, another turn hands the root out again)."""
    guard.string("owner", owner)
    guard.span("lease_ms", lease_ms, minimum=1)
    guard.positive("limit", limit)
    guard.span("retry_ms", retry_ms, minimum=1)
    step = Eval("flow_turn", (keyspace.queue_key(queue, "flow:carrier"),),
                (keyspace.base(queue), owner, str(lease_ms), str(limit), str(retry_ms)))
    return single(step, lambda r: Turn(bool(int(r[0])), int(r[1]), tuple(text(i) for i in r[2:])))
