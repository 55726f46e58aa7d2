"""Flow admission (``admit``), cancel of a waiting subtree and the roll-back of an
uncommitted root: the writes that shape a tree. The theory of operation is the package's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.steps import Batch, Command, Eval, Verb, text, verb
from echomq.verbs import jobs
from echomq.verbs.flows.trees import parse_ref
from echomq.verbs.jobs.bulk import bulk_id

POLICIES = ("fail", "ignore", "drop")
# nodes per admission script call
ADMIT_CHUNK = 500
#: how long (SERVER ms) an admission may take before the carry leg rolls it back
ADMIT_GRACE_MS = 60_000


@dataclass(frozen=True, slots=True)
class Node:
    """One job of a flow: its queue, id, payload, options and children.

    ``mode``/``value`` schedule it (``"now"``, ``"in"`` ms, ``"at"`` epoch ms): a leaf
    waits on the schedule until then, a parent is released no earlier than that (and never
    before its last child settles). ``policy`` is what this node's parent does if this
    node dies or is cancelled: ``"fail"`` (default), ``"ignore"`` or ``"drop"``.
    ``notify_ms``: keep a done token that long when it ends (``jobs.wait_done``).
    ``unique``/``unique_for_ms``: a unique key, as ``jobs.admit``'s (a node whose key a
    live job owns is linked to that job; see the module docstring).
    ``same``: the id of another node of the tree, in the same queue, whose end this leaf
    shares: it is written as a link to that node's job (after every level, so that job
    exists), and settles with its end, result or error. One job then feeds several
    parents: a chain step before a group feeds each of the group's members.
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
    unique: str | None = None
    unique_for_ms: int | None = None
    same: str | None = None

    @property
    def key(self) -> str:
        """The node's row key, ``emq:{queue}:job:<id>`` (how the flow names it)."""
        return keyspace.job_key(self.queue, self.id)

    def walk(self) -> Iterable[Node]:
        """This node and every node below it, parents before children."""
        yield self
        for c in self.children:
            yield from c.walk()


def _check_node(node: Node, seen: set[str], queues: set[str]) -> None:
    if node.queue not in queues:  # a wide flow names few queues many times
        keyspace.validate_queue(node.queue)
        queues.add(node.queue)
    bulk_id(node.id)
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
    if node.unique is not None:
        guard.string("unique", node.unique)
    if node.unique_for_ms is not None:
        if node.unique is None:
            raise ValueError("unique_for_ms needs a unique key")
        guard.span("unique_for_ms", node.unique_for_ms, minimum=1)
    if node.policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {node.policy!r}")
    if node.same is not None and (node.children or node.unique is not None):
        raise ValueError(f"flow node {node.id} shares the end of {node.same}: it has no "
                         "children and no unique key of its own")


def _check_same(levels: list[list[tuple[Node, str]]]) -> None:
    """Every ``same`` names a node of the tree, in the node's queue, that is a job."""
    nodes = {n.id: n for lvl in levels for n, _ in lvl}
    for node in nodes.values():
        if node.same is None:
            continue
        target = nodes.get(node.same)
        if target is None or target.same is not None or target.queue != node.queue:
            raise ValueError(f"flow node {node.id} shares the end of {node.same}, which is "
                             f"no job of the tree in queue {node.queue}")


def _check(root: Node) -> list[list[tuple[Node, str]]]:
    """The tree's levels as ``(node, parent key)`` lists, every argument checked first."""
    if not isinstance(root, Node):
        raise TypeError(f"a flow is a Node, not {type(root).__name__}")
    seen: set[str] = set()
    queues: set[str] = set()
    levels: list[list[tuple[Node, str]]] = []
    level: list[tuple[Node, str]] = [(root, "")]
    # the (queue, unique key)s above each node: a node under its own key would be linked
    # to its ancestor, which waits for it, and neither would ever run
    above: dict[str, frozenset[tuple[str, str]]] = {root.id: frozenset()}
    while level:
        levels.append(level)
        nxt: list[tuple[Node, str]] = []
        for node, _ in level:
            _check_node(node, seen, queues)
            keys = above[node.id]
            if node.unique is not None:
                if (node.queue, node.unique) in keys:
                    raise ValueError(f"flow node {node.id} has the unique key {node.unique!r} "
                                     f"of an ancestor in queue {node.queue}: it would wait "
                                     f"for itself")
                keys = keys | {(node.queue, node.unique)}
            if node.children:
                pk = node.key
                for c in node.children:
                    above[c.id] = keys
                    nxt.append((c, pk))
        level = nxt
    _check_same(levels)
    return levels


def _admit_steps(level: list[tuple[Node, str]], grace_ms: int
                 ) -> list[tuple[list[str], Eval]]:
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
                         "" if node.notify_ms is None else str(node.notify_ms),
                         node.unique or "",
                         "" if node.unique_for_ms is None else str(node.unique_for_ms),
                         node.same or "")
            # the commit deadline rides with the root (a root is alone on its level)
            grace = str(grace_ms) if not chunk[0][1] and chunk[0][0].children else ""
            step = Eval("flow_admit", (keyspace.queue_key(queue, "waiting-children"),),
                        (keyspace.base(queue), grace, *flat))
            out.append(([n.id for n, _ in chunk], step))
    return out


class Admitted(dict[str, Outcome]):
    """``admit``'s answer: ``{id: outcome}`` for every node written or found, and
    ``links``: ``{id: owner id}`` for the nodes linked to the live job that owns their
    unique key (their outcome is ``"linked"``; their subtrees are not admitted, so their
    ids are absent)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}


def _outcome(node: Node, reply: Any) -> Outcome:
    if reply == 0:
        return Outcome.DUPLICATE
    if node.children:
        return Outcome.WAITING
    return Outcome.ENQUEUED if node.mode == "now" else Outcome.SCHEDULED


@verb
def admit(root: Node, grace_ms: int = ADMIT_GRACE_MS) -> Verb[Admitted]:
    """Admit the flow under ``root``: ``{id: outcome}`` for every node (``Admitted``).

    A leaf's outcome is ``"enqueued"`` / ``"scheduled"``, a parent's ``"waiting"``
    (``Outcome.WAITING``), ``"duplicate"`` for an id that already had a row (nothing
    written for it) and ``"linked"`` for a node whose unique key a live job owns, or that
    shares another node's end (``Node.same``). One round trip per level of the tree
    (parents first, see the module docstring), each a pipeline of one script call per
    queue per 500 nodes, one more for the ``same`` links, then the commit (one more). Every node is
    checked before anything is sent. ``grace_ms``: the commit deadline (SERVER clock); a
    flow still uncommitted then is rolled back by the carry leg, and a client that
    commits after that gets ``StateError`` (its tree was cancelled).
    """
    levels = _check(root)
    guard.span("grace_ms", grace_ms, minimum=1)

    def calls() -> Verb[Admitted]:
        out = Admitted()
        nodes = {n.id: n for lvl in levels for n, _ in lvl}
        # nodes that others share the end of: admitted even under a linked parent, since
        # the nodes sharing it wait for it
        targets = {n.same for n in nodes.values() if n.same is not None}
        cut: set[str] = set()  # row keys of linked nodes: their subtrees are not admitted
        shared: list[tuple[Node, str]] = []  # written after every level: their jobs exist

        def write(level: list[tuple[Node, str]]) -> Verb[None]:
            planned = _admit_steps(level, grace_ms)
            replies = yield Batch(tuple(step for _, step in planned))
            for (ids, _), reply in zip(planned, replies, strict=True):
                if isinstance(reply, errors.ServerError):
                    raise reply
                for job_id, r in zip(ids, reply, strict=True):
                    if isinstance(r, int):
                        out[job_id] = _outcome(nodes[job_id], r)
                    else:
                        out[job_id] = Outcome.LINKED
                        out.links[job_id] = text(r)
                        cut.add(nodes[job_id].key)

        for level in levels:
            kept = []
            for n, pk in level:
                if pk in cut and n.id not in targets:
                    cut.add(n.key)
                elif n.same is not None:
                    shared.append((n, pk))
                else:
                    kept.append((n, pk))
            if kept:
                yield from write(kept)
        if shared:
            # a node linked to a unique key's owner passes that owner on
            yield from write([(replace(n, same=out.links.get(n.same or "", n.same)), pk)
                              for n, pk in shared])
        if root.children and out.get(root.id) in (Outcome.WAITING, Outcome.DUPLICATE):
            # the commit (a re-admission of the same ids commits what the first one began)
            committed = yield Command(("ZREM", keyspace.queue_key(root.queue, "flows:open"),
                                       root.id))
            if not int(committed) and out[root.id] == Outcome.WAITING:
                raise errors.StateError(f"flow {root.id} was rolled back before its commit "
                                        f"(admission took longer than {grace_ms} ms)")
        return out

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
            # each child's cancel is the one step of jobs.cancel, sent to its own slot; a
            # linked node is left to its owner (someone else's job), and never written
            # ones (an admission cut short) have nothing to cancel
            live = [k for k, s in zip(kids, states, strict=True)
                    if s is not None and text(s) != "linked"]
            if live:
                yield Batch(tuple(_one(jobs.cancel.steps(q, i)) for q, i in live))
            level = [k for k, s in zip(kids, states, strict=True)
                     if s is not None and text(s) == "waiting-children"]
        return outcome

    return calls()


@verb
def roll_back(queue: str, root_id: str) -> Verb[Outcome]:
    """Roll back the uncommitted flow under ``root_id`` (handed out by ``turn``): cancel the
    root and its waiting subtree (``cancel``; the root's error, written by the turn, says
    why), then drop its open mark. What ``cancel`` answers for the root."""
    guard.string("root_id", root_id)

    def calls() -> Verb[Outcome]:
        outcome = yield from cancel.steps(queue, root_id)
        yield Command(("ZREM", keyspace.queue_key(queue, "flows:open"), root_id))
        return outcome

    return calls()


@verb
def cancel_among(queues: Sequence[str], job_id: str) -> Verb[Outcome]:
    """``cancel`` on each of ``queues`` in turn until one knows ``job_id``: its outcome,
    or ``"absent"`` when none does (an app's cancel by id, which queue unknown)."""
    guard.string("job_id", job_id)

    def calls() -> Verb[Outcome]:
        for q in queues:
            outcome = yield from cancel.steps(q, job_id)
            if outcome != Outcome.ABSENT:
                return outcome
        return Outcome.ABSENT

    return calls()
