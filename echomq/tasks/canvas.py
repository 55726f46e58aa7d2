"""Flows for the task API: signatures, ``app.flow``, ``chain`` and ``group(...).then(...)``.

A ``Signature`` is a task call not yet made: ``fetch.s(page)`` carries the task, its
arguments and how its parent treats its failure (``.on_failure("ignore")``). A ``Flow`` is a
parent signature and its children (signatures or flows), admitted as one tree by
``echomq.verbs.flows`` (parents first, so no child can end before its parent exists; the parent
runs once, after its last child):

    app.flow(report.s(month), children=[fetch.s(p) for p in pages])   # the root's id
    chain(download.s(url), resize.s(), publish.s()).enqueue()          # each fed the last
    group(*(fetch.s(p) for p in pages)).then(merge.s()).enqueue()      # merge(list of results)

In the parent's handler, ``current_job().children()`` lists its children with their state
and JSON result. ``chain`` and ``group(...).then`` also hand the results in as the first
argument: a chain step gets the previous step's result, a group's callback the list of its
members' results in order, and a group inside a chain is a chord (each member gets the
previous step's result, the next step the list of theirs). ``.si`` (an immutable
signature) runs after the step before it without its result. The step before a group runs
once: it is a job under one member and a link to that job (``flows.Node.same``) under the
others (``Shared``). Every node's arguments are checked against its task's function when
the tree is made (``Task.check``: one more positional argument, first, for a fed node),
so a wrong call raises ``TypeError`` before anything is written; a ``unique`` key on the
root that a live job owns makes ``enqueue`` answer that job's id, writing nothing.

Each node has its own options: ``fetch.s(p).options(priority=1, delay=5_000, unique=f"page-{p}",
max_attempts=3)`` (``Signature.options``, spelled as the task API spells them; ``set`` in
Celery's spelling), and a ``Flow``'s options are its root's.

The payload of a flow node is the task payload with one more key, ``flow``: ``{"keep":
ms}`` asks the worker to keep the node's return value (so its end carries it to the parent),
``{"feed": "one" | "all"}`` asks it to pass the children's results in, and ``{"retry":
{...}}`` carries the node's own retry policy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from echomq.connectors.plan import check_size
from echomq.core import backoff as backoff_mod
from echomq.core import guards as guard
from echomq.core import ids, keyspace
from echomq.core.options import check_unique
from echomq.core.payload import PLAIN, encode
from echomq.core.times import seconds_to_ms, to_epoch_ms, to_ms
from echomq.tasks.admission import Plan
from echomq.tasks.producer import Producer
from echomq.verbs import flows
from echomq.verbs.flows import Node

#: how long a flow child's return value is kept on its own queue (it is carried to the
#: parent when the child ends; this only bounds the copy app.result reads)
CHILD_KEEP_MS = 3_600_000
FEEDS = ("", "one", "all")


@dataclass(frozen=True, slots=True)
class Signature:
    """A task call to make later: ``task.s(*args, **kwargs)``, with this node's own options
    (``options``; unset ones are the task's)."""

    task: Any
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    policy: str = "fail"
    priority: int | None = None
    group: str | None = None
    unique: str | None = None
    unique_for_ms: int | None = None
    mode: str = "now"
    value: int = 0
    retry: dict[str, Any] = field(default_factory=dict)
    #: ``si``: the call ignores the result of what runs before it (Celery's meaning)
    immutable: bool = False

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """This call, immutable: in a chain (or as a group's callback) it runs after the
        step before it but is not handed its result. Arguments given replace the
        signature's; none keeps them. ``task.si(...)`` is ``task.s(...).si()``."""
        if args or kwargs:
            return replace(self, args=args, kwargs=kwargs, immutable=True)
        return replace(self, immutable=True)

    def on_failure(self, policy: str) -> Signature:
        """What this node's parent does when it dies or is cancelled: ``"fail"`` (the
        parent is dead-lettered; default), ``"ignore"`` (the parent runs; the child shows
        dead in ``children()``) or ``"drop"`` (the parent runs without it)."""
        if policy not in flows.POLICIES:
            raise ValueError(f"policy must be one of {', '.join(flows.POLICIES)}, "
                             f"not {policy!r}")
        return replace(self, policy=policy)

    def options(
        self,
        *,
        priority: int | None = None,
        group: str | None = None,
        unique: str | None = None,
        unique_for: float | dt.timedelta | None = None,
        delay: int | dt.timedelta | None = None,
        at: int | dt.datetime | None = None,
        max_attempts: int | None = None,
        backoff: backoff_mod.Policy | None = None,
        retry_delay_ms: int | None = None,
    ) -> Signature:
        """This node with its own options (unset ones keep their value; checked here,
        before any I/O), spelled as the task API spells them:

        - ``priority``, ``group`` (a name), ``unique``, ``unique_for`` (seconds or
          ``timedelta``): as ``task.options``. A node whose ``unique`` key a live job owns
          is linked to that job: its parent waits for that job's end (``echomq.verbs.flows``).
        - ``delay`` (ms or ``timedelta``, from admission, SERVER clock; as ``enqueue_in``)
          or ``at`` (epoch ms or ``datetime``; as ``enqueue_at``): a leaf waits on the
          schedule until then; a parent runs no earlier than then, and after its children.
        - ``max_attempts``, ``backoff``, ``retry_delay_ms``: this node's retry policy, in
          place of its task's (as ``@app.task`` takes them).

        ``set`` is the same method, in Celery's spelling."""
        out = replace(self, retry=dict(self.retry))
        if priority is not None:
            out = replace(out, priority=guard.priority(priority))
        if group is not None:
            if not isinstance(group, str):
                raise TypeError(f"a node's group is a name, not {type(group).__name__}")
            out = replace(out, group=keyspace.validate_group(group))
        if unique is not None:
            out = replace(out, unique=check_unique(unique))
        if unique_for is not None:
            out = replace(out, unique_for_ms=seconds_to_ms("unique_for", unique_for))
        if out.unique_for_ms is not None and out.unique is None and self.task.unique is None:
            raise ValueError("unique_for needs a unique key (options(unique=..., ...))")
        if delay is not None and at is not None:
            raise ValueError("give delay or at, not both")
        if delay is not None:
            out = replace(out, mode="in", value=guard.span("delay", to_ms(delay)))
        if at is not None:
            out = replace(out, mode="at", value=guard.instant("at", to_epoch_ms(at)))
        if max_attempts is not None:
            out.retry["max_attempts"] = guard.positive("max_attempts", max_attempts)
        if backoff is not None:
            out.retry["backoff"] = backoff_mod.normalize(backoff)
        if retry_delay_ms is not None:
            out.retry["retry_delay_ms"] = guard.span("retry_delay_ms", retry_delay_ms)
        return out

    set = options

    def __repr__(self) -> str:
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task.name}.{'si' if self.immutable else 's'}({call})"


def _payload(sig: Signature, marks: dict[str, Any]) -> bytes:
    fmt = getattr(getattr(sig.task, "app", None), "format", PLAIN)
    return encode(sig.task.name, sig.args, sig.kwargs, fmt=fmt, flow=marks)


def _queue(task: Any) -> str:
    target = getattr(task, "target_queue", None)
    return str(target()) if callable(target) else str(task.queue)


def _group(sig: Signature) -> str | None:
    """The node's group: a task's fixed group, or what its group function gives for this
    call's arguments (``@app.task(group=lambda tenant, ...: ...)``)."""
    group_for = getattr(sig.task, "group_for", None)
    if callable(group_for):
        found: str | None = group_for(sig.args, sig.kwargs)
        return found
    return getattr(sig.task, "group", None)


def _node(sig: Signature, children: tuple[Node, ...], feed: str, is_child: bool) -> Node:
    # the worker calls a fed node with the fed value first: checked as it will be called
    check = getattr(sig.task, "check", None)
    if callable(check):
        check((None, *sig.args) if feed else sig.args, sig.kwargs)
    marks: dict[str, Any] = {}
    if is_child:
        marks["keep"] = max(CHILD_KEEP_MS, getattr(sig.task, "keep_result_ms", None) or 0)
    if feed:
        marks["feed"] = feed
    if sig.retry:
        marks["retry"] = sig.retry
    unique = sig.unique or getattr(sig.task, "unique", None)
    return Node(
        _queue(sig.task), ids.mint(), _payload(sig, marks), children=children,
        mode=sig.mode, value=sig.value,
        priority=(getattr(sig.task, "priority", 0) or 0) if sig.priority is None
        else sig.priority,
        group=sig.group or _group(sig),
        policy=sig.policy,
        # a task that keeps its result leaves a done token too, so app.result blocks on it
        notify_ms=getattr(sig.task, "keep_result_ms", None),
        unique=unique,
        unique_for_ms=(sig.unique_for_ms or getattr(sig.task, "unique_for_ms", None))
        if unique else None,
    )


@dataclass(frozen=True, slots=True, eq=False)
class Shared:
    """One step whose end feeds ``uses`` nodes of a tree (a chain step before a group: each
    member is fed its result). The step runs once: the first place it appears in the tree
    is its job, the others are linked to that job (``flows.Node.same``) and settle with
    its end, result or error. Made by ``chain``; compared by identity, so the same
    signature written twice is still two runs."""

    source: Signature | Flow
    uses: int


_Memo = dict[int, tuple[Node, int]]  # id(Shared) -> (its job's Node, places seen so far)


def _tree(value: Signature | Flow | Shared, memo: _Memo, is_child: bool = True) -> Node:
    """``value`` as a ``flows.Node`` with fresh ids (a ``Shared`` step's job once, links
    to it in its other places)."""
    if isinstance(value, Shared):
        job, seen = memo.get(id(value)) or (_tree(value.source, memo), 0)
        seen += 1
        if seen == value.uses:  # a reused canvas value gets a fresh job next time
            memo.pop(id(value), None)
        else:
            memo[id(value)] = (job, seen)
        if seen == 1:
            return job
        return Node(job.queue, ids.mint(), job.payload, policy=job.policy, same=job.id)
    if isinstance(value, Flow):
        kids = tuple(_tree(c, memo) for c in value.children)
        return _node(value.parent, kids, value.feed, is_child)
    return _node(value, (), "", is_child)


@dataclass(frozen=True, slots=True)
class Flow:
    """A parent signature and its children (signatures, flows, or steps shared with other
    nodes), not yet admitted.

    ``feed``: ``""`` (the parent reads ``current_job().children()``), ``"one"`` (its one
    child's result is its first argument: a chain step) or ``"all"`` (the list of its
    children's results, in order: a group's callback).
    """

    parent: Signature
    children: tuple[Signature | Flow | Shared, ...] = ()
    feed: str = ""

    def node(self, *, is_child: bool = False) -> Node:
        """The tree as ``flows.Node``s, with fresh ids; every node's arguments checked
        against its task's function (``TypeError`` naming the task)."""
        return _tree(self, {}, is_child)

    def on_failure(self, policy: str) -> Flow:
        """As ``Signature.on_failure``, for this flow's root as someone's child."""
        return replace(self, parent=self.parent.on_failure(policy))

    def options(self, **options: Any) -> Flow:
        """As ``Signature.options``, for this flow's root (e.g. ``at=`` holds a group's
        callback until then, however early its members finish). A ``unique`` key a live
        job owns makes ``enqueue`` write nothing and return that job's id."""
        return replace(self, parent=self.parent.options(**options))

    set = options

    def plan(self) -> Plan[str]:
        """The tree's admission (one round trip per level), every node checked here,
        before any I/O: its plan, answering the root job's id (or, when a live job owns
        the root's unique key, that job's id: nothing was written)."""
        root = self.node()
        _sized(root, self._producer().max_payload_bytes)
        queues = tuple(dict.fromkeys(n.queue for n in root.walk()))
        # a retried tree is admitted by the same ids: a level that landed answers duplicate
        return Plan.made(queues, lambda: flows.admit.steps(root),
                         lambda got: str(got.links.get(root.id, root.id)), durable=False)

    def _producer(self) -> Producer:
        producer: Producer = self.parent.task.app
        return producer

    def enqueue(self) -> str:
        """Admit the tree (one round trip per level); the root job's id."""
        return self._producer().submit(self.plan())

    async def aenqueue(self) -> str:
        """``enqueue``, awaited."""
        return await self._producer().asubmit(self.plan())


def _sized(root: Node, limit: int) -> None:
    """Refuse a flow with a payload over ``limit`` before anything is sent: the tree is
    admitted one level per round trip, so the connector's own check on a lower level would
    come after the upper levels were written."""
    for node in root.walk():
        check_size(node.payload, limit)


def flow(parent: Signature, children: Sequence[Signature | Flow] = ()) -> Flow:
    """A parent and its children: ``flow(report.s(month), [fetch.s(p) for p in pages])``
    (a flow may be another flow's child)."""
    return Flow(_sig(parent), tuple(_member(c) for c in children))


@dataclass(frozen=True, slots=True)
class Fanout:
    """Signatures (or flows) run in parallel; ``.then(callback)`` is called with the list
    of their results once every one has ended. In a chain, a group is a chord: each
    member gets the previous step's result, the next step the list of theirs."""

    members: tuple[Signature | Flow, ...]

    def then(self, callback: Signature) -> Flow:
        """The callback runs after every member, with their results (in order) as its
        first argument (not for an immutable one, ``.si``: it only runs after them)."""
        cb = _sig(callback)
        return Flow(cb, self.members, feed="" if cb.immutable else "all")


def group(*members: Signature | Flow) -> Fanout:
    """``group(a.s(1), a.s(2)).then(total.s())``: a fan-out with a fan-in callback."""
    if len(members) == 1 and isinstance(members[0], (list, tuple)):
        members = tuple(members[0])
    if not members:
        raise ValueError("a group needs at least one member")
    return Fanout(tuple(_member(m) for m in members))


def chain(*steps: Signature | Flow | Fanout) -> Flow:
    """``a`` then ``b`` then ``c``, each called with the previous one's result as its first
    argument: ``chain(a.s(1), b.s(), c.s())`` runs ``c(b(a(1)))`` (an immutable step,
    ``.si``, runs after the previous one without its result). A group in a chain is a
    chord: ``chain(a.s(), group(b.s(), c.s()), d.s())`` gives each member ``a``'s result
    and ``d`` the list ``[b's, c's]``; ``group(...).then(cb.s())`` as a step is the same
    chord with ``cb`` after it. A step that is a flow or a chain starts with its first
    steps (its leaves), fed the same way. A failed step stops the chain (the later ones
    are dead-lettered, naming it). The answer is the last step's job (the tree's root)."""
    if not steps:
        raise ValueError("a chain needs at least one step")
    out = _step(steps[0])
    for step in steps[1:]:
        if isinstance(step, Fanout):
            out = Fanout(_fed(step.members, out))
        else:
            (out,) = _fed((_member(step),), out)
    if isinstance(out, Fanout):
        raise ValueError("a chain ends in a step, not a bare group: give the group a "
                         "callback (group(...).then(cb.s())) or a step after it")
    return out


def _step(value: Any) -> Flow | Fanout:
    if isinstance(value, (Flow, Fanout)):
        return value
    return Flow(_sig(value))


def _leaves(value: Signature | Flow | Shared, seen: set[int]) -> int:
    """How many first steps ``value`` has (its nodes without children; a shared step's
    counted once)."""
    if isinstance(value, Shared):
        if id(value) in seen:
            return 0
        seen.add(id(value))
        return _leaves(value.source, seen)
    if isinstance(value, Flow) and value.children:
        return sum(_leaves(c, seen) for c in value.children)
    return 1


def _fed(steps: tuple[Signature | Flow, ...], before: Flow | Fanout) -> tuple[Flow, ...]:
    """``steps`` (one step, or a group's members) run after ``before``: each of their
    first steps gets ``before``'s result (a group before them: the list of its members'
    results), shared, so ``before`` runs once."""
    seen: set[int] = set()
    uses = sum(_leaves(s, seen) for s in steps)
    sources = before.members if isinstance(before, Fanout) else (before,)
    feed = "all" if isinstance(before, Fanout) else "one"
    shared = tuple(Shared(s, uses) for s in sources)
    memo: dict[int, Shared] = {}
    out: list[Flow] = []
    for step in steps:
        fed = _attach(step, shared, feed, memo)
        assert isinstance(fed, Flow)  # only a Shared comes back as one
        out.append(fed)
    return tuple(out)


def _attach(step: Signature | Flow | Shared, sources: tuple[Shared, ...], feed: str,
            memo: dict[int, Shared]) -> Flow | Shared:
    """``step`` with ``sources`` under each of its first steps; a shared step inside it
    (an inner chord's) is fed once and stays shared (``memo``: old to new)."""
    if isinstance(step, Shared):
        new = memo.get(id(step))
        if new is None:
            source = _attach(step.source, sources, feed, memo)
            assert isinstance(source, Flow)  # only a Shared comes back as one
            new = memo[id(step)] = Shared(source, step.uses)
        return new
    if isinstance(step, Flow) and step.children:
        kids = tuple(_attach(c, sources, feed, memo) for c in step.children)
        return replace(step, children=kids)
    sig = step.parent if isinstance(step, Flow) else step
    return Flow(sig, sources, "" if sig.immutable else feed)


def _sig(value: Any) -> Signature:
    if not isinstance(value, Signature):
        raise TypeError(f"expected a signature (task.s(...)), not {type(value).__name__}")
    return value


def _member(value: Any) -> Signature | Flow:
    return value if isinstance(value, Flow) else _sig(value)
