"""Outcomes of the verbs: ``StrEnum`` members, so ``outcome == "scheduled"`` holds."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """What an admission or a registration verb did, as the string it returns
    (``Outcome.DUPLICATE == "duplicate"``)."""

    ENQUEUED = "enqueued"
    SCHEDULED = "scheduled"
    DUPLICATE = "duplicate"
    RETRYING = "retrying"
    DEAD = "dead"
    REGISTERED = "registered"
    EXISTS = "exists"
    UPDATED = "updated"
    ADVANCED = "advanced"
    ABSENT = "absent"
    FIRED = "fired"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    REQUESTED = "requested"
    WAITING = "waiting"
    LINKED = "linked"  # a flow node whose unique key a live job owns (echomq.verbs.flows)
    PAUSED = "paused"
    RESUMED = "resumed"
    DEBOUNCED = "debounced"  # a call folded into the job its debounce key holds
