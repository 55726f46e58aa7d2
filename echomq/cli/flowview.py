"""``echomq job <id>`` for a flow: the tree below a parent, one line per node with its
queue and state, and the parent a child belongs to."""

from __future__ import annotations

from collections import Counter
from typing import Any

from echomq.verbs import flows

#: children shown per node before "... and N more"
SHOWN = 20


def lines(tree: flows.Tree, shown: int = SHOWN) -> list[str]:
    """The tree as text lines (box-drawing branches), ``shown`` children per node."""
    out = [f"{tree.id}  {tree.queue}  {tree.state or '-'}"]

    def walk(node: flows.Tree, prefix: str) -> None:
        kids = node.children
        for i, child in enumerate(kids[:shown]):
            last = len(kids) <= shown and i == len(kids) - 1
            branch, more = ("└── ", "    ") if last else ("├── ", "│   ")
            ended = child.state in ("dead", "cancelled")
            err = f"  ({child.error})" if child.error and ended else ""
            out.append(f"{prefix}{branch}{child.id}  {child.queue}  {child.state or '-'}{err}")
            walk(child, prefix + more)
        if len(kids) > shown:
            tally = Counter(c.state or "-" for c in kids[shown:])
            summary = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
            out.append(f"{prefix}└── ... and {len(kids) - shown} more ({summary})")

    walk(tree, "")
    return out


def show(conn: Any, queue: str, job_id: str, row: dict[str, Any] | None,
         state: str | None = None) -> list[str]:
    """The flow lines for ``echomq job``: the parent this job waits on (if a child) and its
    tree (if a parent); ``[]`` for a job outside any flow. ``state`` stands for the root's
    when its row is gone (a completed parent whose ack kept only its result)."""
    out: list[str] = []
    parent = (row or {}).get("parent")
    if parent:
        pq, pid = flows.parse_ref(parent)
        out.append(f"parent    {pid} (queue {pq}, policy {(row or {}).get('policy', 'fail')})")
    linked = (row or {}).get("linked")
    if linked:  # a node whose unique key a live job owned: that job's end is this node's
        out.append(f"linked    {linked} (its unique key's owner: its end counts as this node's)")
    tree = flows.tree(conn, queue, job_id)
    tree.state = tree.state or state
    if tree.children:
        tally = Counter(c.state or "-" for c in tree.children)
        summary = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        out.append(f"children  {len(tree.children)} ({summary})")
        out.append("flow")
        out += ["  " + line for line in lines(tree)]
    return out
