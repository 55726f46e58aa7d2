"""Flows: trees of jobs in which a parent waits for its children, across queues and shards.

Theory of operation. A flow is a tree of ``Node``s, each a job in any queue. Every queue
lives under its own hash tag, so on Valkey Cluster a parent and its children sit on
different shards and no script may touch both. A settlement therefore happens in two
halves, each one atomic script on one slot:

1. On the child's slot: the script that ends the child (ack, a retry that dead-letters, a
   reap past the stall limit, a cancel) also appends an entry to the child queue's flow
   outbox ``emq:{cq}:flow:outbox`` (a stream): child, parent row key, how it ended, its
   settlement number ``fseq``, its failure policy, result or error
   (``scripts/includes/flow.lua``).
2. On the parent's slot: the Pump's "flow completions" leg (``carry``) reads the outbox
   and runs ``@flow_carry`` there, then deletes the entries it carried. The carry keeps,
   per parent and child, the last settlement number delivered, and removes the child from
   the parent's ``deps`` SET, counted only when ``SREM`` returned 1: so a Pump killed
   between the carry and the delete, or two Pumps carrying the same entry, count each
   child exactly once. The carry that empties ``deps`` releases the parent to pending (or
   its lane) at its priority.

Admission (``admit``) writes the tree level by level, parents first: a parent's row is
written ``waiting-children`` with its whole ``deps`` set before any of its children
exists, so no child can end before its parent knows what it waits for, and a parent is
released only by the carry of its last child. A parent is never claimable before then (it
sits on ``emq:{q}:waiting-children``, not pending). If admission is cut short (the client
dies between levels), the parents admitted so far wait for children that were never
written; ``admit`` of the same tree again (same ids) writes only what is missing.

Failure policies, per child (``Node.policy``): ``"fail"`` (default): the child's death or
cancel dead-letters the parent (``error`` names the child); if the child is revived and
completes, the parent is released after all. ``"ignore"``: the death counts as a
settlement (``children()`` shows it dead). ``"drop"``: the dependency is removed
(``children()`` leaves it out). ``cancel`` of a waiting parent cancels its waiting
subtree.

Clocks: the waiting-children score, ``died_at`` of a failed parent and the outbox stream
ids are SERVER ms. Nothing here reads the host clock.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import _guards as guard
from . import errors, jobs, keyspace
from .outcomes import Outcome
from .steps import Batch, Command, Eval, Verb, pairs, single, text, verb

POLICIES = ("fail", "ignore", "drop")
# entries carried per outbox read, and nodes per admission script call
CARRY_BATCH = 500
ADMIT_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Node:
    """One job of a flow: its queue, id, payload, options and children.

    ``mode``/``value`` schedule a leaf (``"now"``, ``"in"`` ms, ``"at"`` epoch ms); a
    parent runs when its last child settles. ``policy`` is what this node's parent does if
    this node dies or is cancelled: ``"fail"`` (default), ``"ignore"`` or ``"drop"``.
    ``notify_ms``: keep a done token that long when it ends (``jobs.wait_done``).
    """

    queue: str
    id: str
    payload: bytes | str
    children: tuple[Node, ...] = ()
    mode: str = "now"
    value: int = 0
    priority: int = 0
    group: str | None = None
    policy: str = "fail"
    notify_ms: int | None = None

    @property
    def key(self) -> str:
        """The node's row key, ``emq:{queue}:job:<id>`` (how the flow names it)."""
        return keyspace.job_key(self.queue, self.id)

    def walk(self) -> Iterable[Node]:
        """This node and every node below it, parents before children."""
        yield self
        for c in self.children:
            yield from c.walk()


def parse_ref(ref: str) -> tuple[str, str]:
    """``(queue, id)`` of a row key ``emq:{queue}:job:<id>`` (a queue name has no ``}``)."""
    head = f"{keyspace.PREFIX}:{{"
    end = ref.find("}:job:")
    if not ref.startswith(head) or end < 0:
        raise ValueError(f"not a job row key: {ref!r}")
    return ref[len(head):end], ref[end + len("}:job:"):]


def _check(root: Node) -> list[list[tuple[Node, str]]]:
    """The tree's levels as ``(node, parent key)`` lists, every argument checked first."""
    if not isinstance(root, Node):
        raise TypeError(f"a flow is a Node, not {type(root).__name__}")
    seen: set[str] = set()
    levels: list[list[tuple[Node, str]]] = []
    level: list[tuple[Node, str]] = [(root, "")]
    while level:
        levels.append(level)
        nxt: list[tuple[Node, str]] = []
        for node, _ in level:
            keyspace.validate_queue(node.queue)
            jobs._bulk_id(node.id)
            if node.id in seen:
                raise ValueError(f"job id {node.id} appears twice in the flow")
            seen.add(node.id)
            guard.payload(node.payload)
            guard.mode(node.mode) if node.mode != "now" else None
            if node.mode == "in":
                guard.span("value", node.value)
            elif node.mode == "at":
                guard.instant("value", node.value)
            jobs.Options.of(node.priority, node.group)
            if node.notify_ms is not None:
                guard.span("notify_ms", node.notify_ms, minimum=1)
            if node.policy not in POLICIES:
                raise ValueError(f"policy must be one of {', '.join(POLICIES)}, "
                                 f"not {node.policy!r}")
            nxt.extend((c, node.key) for c in node.children)
        level = nxt
    return levels


def _admit_steps(level: list[tuple[Node, str]]) -> list[tuple[list[str], Eval]]:
    by_queue: dict[str, list[tuple[Node, str]]] = defaultdict(list)
    for node, parent in level:
        by_queue[node.queue].append((node, parent))
    out: list[tuple[list[str], Eval]] = []
    for queue, nodes in by_queue.items():
        for i in range(0, len(nodes), ADMIT_CHUNK):
            chunk = nodes[i:i + ADMIT_CHUNK]
            flat: list[Any] = []
            for node, parent in chunk:
                flat += (node.id, node.payload, node.mode, str(node.value),
                         str(node.priority) if node.priority else "", node.group or "",
                         parent, "" if node.policy == "fail" else node.policy,
                         "\n".join(c.key for c in node.children),
                         "" if node.notify_ms is None else str(node.notify_ms))
            step = Eval("flow_admit", (keyspace.queue_key(queue, "waiting-children"),),
                        (keyspace.base(queue), *flat))
            out.append(([n.id for n, _ in chunk], step))
    return out


@verb
def admit(root: Node) -> Verb[dict[str, Outcome]]:
    """Admit the flow under ``root``: ``{id: outcome}`` for every node.

    A leaf's outcome is ``"enqueued"`` / ``"scheduled"``, a parent's ``"waiting"``
    (``Outcome.WAITING``), and ``"duplicate"`` for an id that already had a row (nothing
    written for it). One round trip per level of the tree (parents first, see the module
    docstring), each a pipeline of one script call per queue per 500 nodes. Every node is
    checked before anything is sent.
    """
    levels = _check(root)

    def calls() -> Verb[dict[str, Outcome]]:
        out: dict[str, Outcome] = {}
        nodes = {n.id: n for lvl in levels for n, _ in lvl}
        for level in levels:
            planned = _admit_steps(level)
            replies = yield Batch(tuple(step for _, step in planned))
            for (ids, _), reply in zip(planned, replies, strict=True):
                if isinstance(reply, errors.ServerError):
                    raise reply
                for job_id, r in zip(ids, reply, strict=True):
                    n = nodes[job_id]
                    if int(r) != 1:
                        out[job_id] = Outcome.DUPLICATE
                    elif n.children:
                        out[job_id] = Outcome.WAITING
                    else:
                        out[job_id] = Outcome.ENQUEUED if n.mode == "now" else Outcome.SCHEDULED
        return out

    return calls()


class Carried(NamedTuple):
    """What one ``carry`` did: entries ``read``, ``counted`` (a child newly settled),
    parents ``released``, parents ``failed``, ``stale`` (already carried), ``orphans``
    (the parent row is gone) and ``refused`` (entries whose carry the server refused: left
    in the outbox for the next carry)."""

    read: int = 0
    counted: int = 0
    released: int = 0
    failed: int = 0
    stale: int = 0
    orphans: int = 0
    refused: int = 0

    def plus(self, other: Carried) -> Carried:
        """Both counts added up."""
        return Carried(*(a + b for a, b in zip(self, other, strict=True)))


def _entries(reply: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(text(eid), _hash(fields)) for eid, fields in (reply or [])]


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
        got = _entries((yield Command(("XRANGE", outbox, "-", "+", "COUNT", batch))))
        if not got:
            return Carried()
        by_queue: dict[str, list[tuple[str, list[Any]]]] = defaultdict(list)
        for eid, f in got:
            pq, pid = parse_ref(text(f["parent"]))
            ref = keyspace.job_key(queue, text(f["child"]))
            by_queue[pq].append((eid, [pid, ref, text(f["seq"]), text(f["how"]),
                                       text(f.get("policy", b"fail")),
                                       f.get("result", b""), f.get("error", b"")]))
        plan = [(pq, items) for pq, items in by_queue.items()]
        steps = tuple(
            Eval("flow_carry", (keyspace.queue_key(pq, "waiting-children"),),
                 (keyspace.base(pq), *(v for _, argv in items for v in argv)))
            for pq, items in plan
        )
        replies = yield Batch(steps)
        done: list[str] = []
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


@dataclass(frozen=True, slots=True)
class Child:
    """A child as its parent sees it: where it lives, how it ended (``None`` while it has
    not settled, as far as the carries delivered), its result (JSON bytes, when its ack
    kept one) and its last error."""

    queue: str
    id: str
    state: str | None
    result: bytes | None = None
    error: str | None = None

    @property
    def value(self) -> Any:
        """The result decoded from JSON (``None`` when none was kept)."""
        return json.loads(self.result) if self.result is not None else None


@verb
def children(queue: str, job_id: str) -> Verb[list[Child]]:
    """The children of flow parent ``job_id`` of ``queue``, in the order they were given,
    with what the carries delivered (read on the parent's slot; one round trip). A child
    dropped by its ``"drop"`` policy is left out."""
    guard.string("job_id", job_id)
    kids = keyspace.queue_key(queue, f"kids:{job_id}")
    flow = keyspace.queue_key(queue, f"flow:{job_id}")

    def calls() -> Verb[list[Child]]:
        refs, got = yield Batch((Command(("LRANGE", kids, 0, -1)), Command(("HGETALL", flow))))
        info = _hash(got)
        out: list[Child] = []
        for raw_ref in refs:
            ref = text(raw_ref)
            state = info.get(f"s:{ref}")
            st = text(state) if state is not None else None
            if st == "dropped":
                continue
            cq, cid = parse_ref(ref)
            err = info.get(f"e:{ref}")
            out.append(Child(cq, cid, st, info.get(f"r:{ref}"),
                             text(err) if err is not None else None))
        return out

    return calls()


@dataclass(slots=True)
class Tree:
    """A node of a flow as it stands: the row's state (or, when the row is gone, e.g.
    completed and deleted by its ack, the end its parent's carry recorded; ``None`` if
    neither is known), its last error and its children, read from every slot involved."""

    queue: str
    id: str
    state: str | None = None
    error: str | None = None
    children: list[Tree] = field(default_factory=list)

    def walk(self) -> Iterable[Tree]:
        """This node and every node below it, parents first."""
        yield self
        for c in self.children:
            yield from c.walk()


def _hash(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return pairs(reply or [])


@verb
def tree(queue: str, job_id: str, depth: int = 10, width: int | None = None) -> Verb[Tree]:
    """The flow below ``job_id``: each node's current state, ``depth`` levels down (and,
    with ``width``, at most that many children per node: a bounded read for a page).

    One round trip per level (the rows' states, the child lists and what the carries
    recorded, pipelined; on a cluster each read goes to its own shard).
    """
    guard.string("job_id", job_id)
    guard.non_negative("depth", depth)
    last = -1 if width is None else guard.positive("width", width) - 1
    root = Tree(queue, job_id)

    def calls() -> Verb[Tree]:
        level = [root]
        for d in range(depth + 1):
            reads: list[Command] = []
            for n in level:
                reads.append(Command(("HMGET", keyspace.job_key(n.queue, n.id),
                                      "state", "error")))
                reads.append(Command(("LRANGE", keyspace.queue_key(n.queue, f"kids:{n.id}"),
                                      0, last)))
                reads.append(Command(("HGETALL", keyspace.queue_key(n.queue, f"flow:{n.id}"))))
            replies = yield Batch(tuple(reads))
            nxt: list[Tree] = []
            for i, n in enumerate(level):
                row, refs, flow = replies[3 * i:3 * i + 3]
                if row[0] is not None:
                    n.state = text(row[0])
                if row[1] is not None:
                    n.error = text(row[1])
                if d == depth:
                    continue
                info = _hash(flow)
                for raw_ref in refs:
                    ref = text(raw_ref)
                    cq, cid = parse_ref(ref)
                    carried = info.get(f"s:{ref}")
                    child = Tree(cq, cid, text(carried) if carried is not None else None)
                    n.children.append(child)
                    nxt.append(child)
            if not nxt:
                break
            level = nxt
        return root

    return calls()


def _one(steps: Verb[Any]) -> Eval:
    step = next(steps)
    assert isinstance(step, Eval)
    return step


@verb
def cancel(queue: str, job_id: str) -> Verb[Outcome]:
    """Cancel ``job_id`` and, when it is a flow parent still waiting for its children, its
    waiting subtree: ``"cancelled"``, ``"requested"`` or ``"absent"`` for ``job_id``
    itself (as ``jobs.cancel``).

    The parent is cancelled first (so no late carry can release it), then its children
    level by level on their own slots: a waiting child is cancelled, a running one gets a
    cancel request, a finished one is left as it is. One round trip per level.
    """
    guard.string("job_id", job_id)

    def calls() -> Verb[Outcome]:
        state = yield Command(("HGET", keyspace.job_key(queue, job_id), "state"))
        outcome = yield from jobs.cancel.steps(queue, job_id)
        if state is None or text(state) != "waiting-children" or outcome != Outcome.CANCELLED:
            return outcome
        level = [(queue, job_id)]
        while level:
            refs = yield Batch(tuple(
                Command(("LRANGE", keyspace.queue_key(q, f"kids:{i}"), 0, -1))
                for q, i in level))
            kids = [parse_ref(text(r)) for got in refs for r in got]
            if not kids:
                break
            states = yield Batch(tuple(
                Command(("HGET", keyspace.job_key(q, i), "state")) for q, i in kids))
            # each child's cancel is the one step of jobs.cancel, sent to its own slot
            yield Batch(tuple(_one(jobs.cancel.steps(q, i)) for q, i in kids))
            level = [k for k, s in zip(kids, states, strict=True)
                     if s is not None and text(s) == "waiting-children"]
        return outcome

    return calls()
