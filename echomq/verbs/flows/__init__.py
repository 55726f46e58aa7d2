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
2. On the parent's slot: the carry leg (``carry``; every Consumer's and Metronome's beat
   runs it, ``echomq.runtime.beat.carry_flows``, as does a Pump) reads the outbox and runs
   ``@flow_carry`` there, then deletes the entries it carried. The carry keeps, per parent
   and child, the last settlement number delivered, and removes the child from the
   parent's ``deps`` SET, counted only when ``SREM`` returned 1: so a carrier killed
   between the carry and the delete, or two carriers racing, count each child exactly
   once. The carry that empties ``deps`` releases the parent to pending (or its lane) at
   its priority, or to the schedule when it was given a delay or run-at still ahead.

Admission (``admit``) writes the tree level by level, parents first: a parent's row is
written ``waiting-children`` with its whole ``deps`` set before any of its children
exists, so no child can end before its parent knows what it waits for, and a parent is
released only by the carry of its last child. The root is written with an open mark
(``emq:{q}:flows:open``, scored by a SERVER-ms deadline ``grace_ms`` ahead) that the
client removes after its last level: the commit. A client that dies between levels leaves
a root that waits for children that were never written; past the deadline the carry leg
rolls it back (``roll_back``: the root and its waiting subtree are cancelled, the root's
error says why), so no parent is left waiting for ever. ``admit`` of the same tree again
(same ids) before then writes only what is missing and commits.

Unique keys. A node may carry a ``unique`` key (as ``jobs.admit``). When a live job owns
it, the node is *linked* to that job instead of admitted: a stub row (state ``linked``)
that settles when the owner ends, with the owner's end, result or error (BullMQ's answer
to a child whose id exists): its parent waits for the owner, and a linked parent's own
children are not admitted. A linked root admits nothing; ``admit`` names the owner.
A node may also be linked to another node of its own tree (``Node.same``: one job feeding
several parents, a chain step before a group's members); such links are written after
every level, so the job they share exists (and is admitted even under a linked parent).

Failure policies, per child (``Node.policy``): ``"fail"`` (default): the child's death or
cancel dead-letters the parent (``error`` names the child); if the child is revived and
completes, the parent is released after all. ``"ignore"``: the death counts as a
settlement (``children()`` shows it dead). ``"drop"``: the dependency is removed
(``children()`` leaves it out). ``cancel`` of a waiting parent cancels its waiting
subtree.

Clocks: the waiting-children score, ``died_at`` of a failed parent, ``not_before``, the
commit deadline and the outbox stream ids are SERVER ms. Nothing here reads the host
clock.
"""

from __future__ import annotations

from echomq.verbs.flows.admission import (
    ADMIT_CHUNK,
    ADMIT_GRACE_MS,
    POLICIES,
    Admitted,
    Node,
    admit,
    cancel,
    cancel_among,
    roll_back,
)
from echomq.verbs.flows.carrying import (
    CARRY_BATCH,
    Carried,
    Turn,
    carry,
    hold_carrier,
    outbox_size,
    turn,
)
from echomq.verbs.flows.trees import Child, Tree, children, parse_ref, tree, waiting

__all__ = ["ADMIT_CHUNK", "ADMIT_GRACE_MS", "CARRY_BATCH", "POLICIES", "Admitted", "Carried",
           "Child", "Node", "Tree", "Turn", "admit", "cancel", "cancel_among", "carry", "children",
           "hold_carrier", "outbox_size", "parse_ref", "roll_back", "tree", "turn", "waiting"]
