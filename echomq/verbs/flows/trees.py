"""Reading a flow: a parent's children as it sees them, and the tree below a node.

Both read what the carries delivered on the parent's slot (``emq:{q}:kids:<id>``, the list
of children in order, and ``emq:{q}:flow:<id>``, per child the end carried, its result and
error) and, for ``tree``, each node's row on its own slot: one pipelined round trip per
level, each read sent to its own shard on a cluster. ``echomq.verbs.flows`` re-exports these.

Clocks: none is read here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.payload import PLAIN
from echomq.core.steps import Batch, Command, Verb, pairs, single, text, verb


def parse_ref(ref: str) -> tuple[str, str]:
    """``(queue, id)`` of a row key ``emq:{queue}:job:<id>`` (a queue name has no ``}``)."""
    head = f"{keyspace.PREFIX}:{{"
    end = ref.find("}:job:")
    if not ref.startswith(head) or end < 0:
        raise ValueError(f"not a job row key: {ref!r}")
    return ref[len(head):end], ref[end + len("}:job:"):]


def hash_of(reply: Any) -> dict[str, Any]:
    """A hash reply (a dict at RESP3, a flat list at RESP2) as ``{str field: value}``."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return pairs(reply or [])


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
        return PLAIN.loads(self.result) if self.result is not None else None


@verb
def waiting(queue: str) -> Verb[int]:
    """How many flow parents of ``queue`` wait for their children (``ZCARD`` of its
    waiting-children set): the count ``echomq stats`` shows beside the state sets."""
    return single(Command(("ZCARD", keyspace.queue_key(queue, "waiting-children"))), int)


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
        info = hash_of(got)
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
                info = hash_of(flow)
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
