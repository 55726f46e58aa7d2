"""A consumer's counters: what its claims, settlements and legs did since it started."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ConsumerStats:
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    delayed: int = 0
    handed_back: int = 0  # jobs of another app's task sent back to their queue
    rate_limited: int = 0
    cancelled: int = 0
    suspended: int = 0  # runs a durable sleep or wait parked (issue 35)
    timed_out: int = 0
    abandoned: int = 0  # plain-function handlers left running in their thread at a timeout
    lost: int = 0
    # a refused outcome whose own earlier try had landed (its reply lost, e.g. in a
    # restart): not lost, and counted in completed/retried/... as well when known
    already_settled: int = 0
    reaped: int = 0
    promoted: int = 0
    degraded_sleeps: list[int] = field(default_factory=list)
