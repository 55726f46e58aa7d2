"""Retention: completed, dead and cancelled jobs must not grow memory without bound.

The classic Bull out-of-memory was a completed set nobody trimmed. Here the runtime's
defaults are: a completed row is deleted by its ack (nothing to trim), a dead row is kept
30 days (a cancelled or expired row likewise, under the dead bounds), all configurable. When rows
are kept, ``trim`` drops the oldest beyond a count and those older than an age, in bounded
batches, inside the beats that already run (the Consumer's recovery leg or the Metronome),
never as a separate sweeper.

Clocks: a kept row's score is the SERVER ms it completed or died (written by ``ack`` /
``retry`` / ``reap``), and ``trim`` compares ages against SERVER ``TIME``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, single, verb
from echomq.core.times import span_ms

DEAD_DEFAULT_MS = 30 * 86_400_000
TRIM_BATCH = 200


@dataclass(frozen=True, slots=True)
class Retention:
    """What to keep of finished jobs.

    ``keep_completed`` (a count) and/or ``keep_completed_for`` (ms or ``timedelta``): keep
    completed rows, trimmed to these bounds. Both ``None`` (the default): the ack deletes
    the row. ``keep_dead`` / ``keep_dead_for`` bound the dead-letter set the same way;
    dead rows are kept 30 days by default and never deleted by count unless asked.
    ``keep_errors``: how many failures a row's history keeps (``JobInfo.errors``; 0: none).
    """

    keep_completed: int | None = None
    keep_completed_for: int | None = None
    keep_dead: int | None = None
    keep_dead_for: int | None = DEAD_DEFAULT_MS
    batch: int = TRIM_BATCH
    keep_errors: int = 10

    @classmethod
    def of(
        cls,
        keep_completed: int | None = None,
        keep_completed_for: int | timedelta | None = None,
        keep_dead: int | None = None,
        keep_dead_for: int | timedelta | None = timedelta(days=30),
        batch: int = TRIM_BATCH,
    ) -> Retention:
        """Build a retention from counts and ages (ms or ``timedelta``), checked up front."""
        if keep_completed is not None:
            guard.non_negative("keep_completed", keep_completed)
        if keep_dead is not None:
            guard.non_negative("keep_dead", keep_dead)
        guard.positive("batch", batch)
        return cls(
            keep_completed,
            span_ms("keep_completed_for", keep_completed_for),
            keep_dead,
            span_ms("keep_dead_for", keep_dead_for),
            batch,
        )

    @property
    def keeps_completed(self) -> bool:
        """Whether an ack keeps the row (``ack(keep=True)``) rather than deleting it."""
        return bool(self.keep_completed) or bool(self.keep_completed_for)


DEFAULT = Retention()


def resolve(
    policy: Retention | None,
    keep_completed: int | None = None,
    keep_completed_for: int | timedelta | None = None,
) -> Retention:
    """``policy``, or one built from the two shorthand bounds (not both ways at once)."""
    if policy is not None:
        if keep_completed is not None or keep_completed_for is not None:
            raise TypeError("pass retention= or keep_completed/keep_completed_for, not both")
        return policy
    if keep_completed is None and keep_completed_for is None:
        return DEFAULT
    return Retention.of(keep_completed=keep_completed, keep_completed_for=keep_completed_for)


@verb
def trim(
    queue: str,
    which: str,
    keep: int | None,
    keep_for_ms: int | None,
    batch: int = TRIM_BATCH,
) -> Verb[int]:
    """Trim the ``which`` set (``"completed"``, ``"dead"``, ``"cancelled"`` or
    ``"expired"``): oldest first, at most ``batch`` rows, beyond ``keep`` members or older
    than ``keep_for_ms`` (SERVER clock).

    Returns how many were trimmed; ``None`` bounds are not applied.
    """
    if which not in ("completed", "dead", "cancelled", "expired"):
        raise ValueError(f"which must be 'completed', 'dead', 'cancelled' or 'expired', "
                         f"not {which!r}")
    keep_arg = -1 if keep is None else guard.non_negative("keep", keep)
    age_arg = -1 if keep_for_ms is None else guard.span("keep_for_ms", keep_for_ms)
    guard.positive("batch", batch)
    step = Eval(
        "trim",
        (keyspace.queue_key(queue, which),),
        (keyspace.base(queue), str(keep_arg), str(age_arg), str(batch), which),
    )
    return single(step, int)


@verb
def apply(queue: str, policy: Retention) -> Verb[int]:
    """One bounded trim pass of both terminal sets under ``policy``. SERVER clock.

    Completed rows are trimmed only when the policy keeps them (otherwise acks delete them
    and the set stays empty).
    """
    done = 0
    if policy.keeps_completed:
        done += yield from trim.steps(
            queue, "completed", policy.keep_completed or None,
            policy.keep_completed_for or None, policy.batch,
        )
    if policy.keep_dead is not None or policy.keep_dead_for is not None:
        # cancelled and expired rows are kept like dead ones: the same bounds, each
        # trimmed on its own set
        for which in ("dead", "cancelled", "expired"):
            done += yield from trim.steps(
                queue, which, policy.keep_dead, policy.keep_dead_for, policy.batch
            )
    return int(done)
