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
members' results in order.

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
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from echomq.connectors.plan import check_size
from echomq.core import backoff as backoff_mod
from echomq.core import guards as guard
from echomq.core import ids, keyspace
from echomq.core.options import check_unique
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
        return f"{self.task.name}.s({call})"


def _payload(sig: Signature, marks: dict[str, Any]) -> bytes:
    body = json.loads(sig.task.payload(*sig.args, **sig.kwargs))
    if marks:
        body["flow"] = marks
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


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


@dataclass(frozen=True, slots=True)
class Flow:
    """A parent signature and its children (signatures or flows), not yet admitted.

    ``feed``: ``""`` (the parent reads ``current_job().children()``), ``"one"`` (its one
    child's result is its first argument: a chain step) or ``"all"`` (the list of its
    children's results, in order: a group's callback).
    """

    parent: Signature
    children: tuple[Signature | Flow, ...] = ()
    feed: str = ""

    def node(self, *, is_child: bool = False) -> Node:
        """The tree as ``flows.Node``s, with fresh ids."""
        kids = tuple(c.node(is_child=True) if isinstance(c, Flow)
                     else _node(c, (), "", True) for c in self.children)
        node = _node(self.parent, kids, self.feed, is_child)
        return node

    def on_failure(self, policy: str) -> Flow:
        """As ``Signature.on_failure``, for this flow's root as someone's child."""
        return replace(self, parent=self.parent.on_failure(policy))

    def options(self, **options: Any) -> Flow:
        """As ``Signature.options``, for this flow's root (e.g. ``at=`` holds a group's
        callback until then, however early its members finish)."""
        return replace(self, parent=self.parent.options(**options))

    set = options

    def plan(self) -> Plan[str]:
        """The tree's admission (one round trip per level), every node checked here,
        before any I/O: its plan, answering the root job's id."""
        root = self.node()
        _sized(root, self._producer().max_payload_bytes)
        queues = tuple(dict.fromkeys(n.queue for n in root.walk()))
        # a retried tree is admitted by the same ids: a level that landed answers duplicate
        return Plan.made(queues, lambda: flows.admit.steps(root), lambda _: root.id,
                         durable=False)

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


def chain(*steps: Signature | Flow) -> Flow:
    """``a`` then ``b`` then ``c``, each called with the previous one's result as its first
    argument: ``chain(a.s(1), b.s(), c.s())`` runs ``c(b(a(1)))``. A failed step stops
    the chain (the later ones are dead-lettered, naming it)."""
    if not steps:
        raise ValueError("a chain needs at least one step")
    first = steps[0]
    out = first if isinstance(first, Flow) else Flow(_sig(first))
    for step in steps[1:]:
        if isinstance(step, Flow):
            out = replace(step, children=(*step.children, out), feed=step.feed or "one")
        else:
            out = Flow(_sig(step), (out,), feed="one")
    return out


@dataclass(frozen=True, slots=True)
class Fanout:
    """Signatures (or flows) run in parallel; ``.then(callback)`` is called with the list
    of their results once every one has ended."""

    members: tuple[Signature | Flow, ...]

    def then(self, callback: Signature) -> Flow:
        """The callback runs after every member, with their results (in order) as its
        first argument."""
        return Flow(_sig(callback), self.members, feed="all")


def group(*members: Signature | Flow) -> Fanout:
    """``group(a.s(1), a.s(2)).then(total.s())``: a fan-out with a fan-in callback."""
    if len(members) == 1 and isinstance(members[0], (list, tuple)):
        members = tuple(members[0])
    if not members:
        raise ValueError("a group needs at least one member")
    return Fanout(tuple(_member(m) for m in members))


def _sig(value: Any) -> Signature:
    if not isinstance(value, Signature):
        raise TypeError(f"expected a signature (task.s(...)), not {type(value).__name__}")
    return value


def _member(value: Any) -> Signature | Flow:
    return value if isinstance(value, Flow) else _sig(value)
