"""Flows: trees of jobs in which a parent waits for its children, across queues and shards.

``admit(conn, Node(...))`` writes a tree; ``children``, ``tree`` and ``cancel`` read and
stop one; ``turn``, ``carry`` and ``roll_back`` are the carry leg every beat runs. Either
connector, like the verbs in ``jobs``.
"""

from __future__ import annotations

from echomq.verbs.flows import (
    ADMIT_CHUNK,
    ADMIT_GRACE_MS,
    CARRY_BATCH,
    POLICIES,
    Admitted,
    Carried,
    Child,
    Node,
    Tree,
    Turn,
    admit,
    cancel,
    cancel_among,
    carry,
    children,
    hold_carrier,
    outbox_size,
    parse_ref,
    roll_back,
    tree,
    turn,
    waiting,
)

__all__ = [
    "ADMIT_CHUNK", "ADMIT_GRACE_MS", "CARRY_BATCH", "POLICIES", "Admitted", "Carried", "Child",
    "Node", "Tree", "Turn", "admit", "cancel", "cancel_among", "carry", "children", "hold_carrier",
    "outbox_size", "parse_ref", "roll_back", "tree", "turn", "waiting",
]
