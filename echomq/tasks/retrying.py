"""Ambiguous admissions retried with their minted id: ``App(retry_for=...)``.

Theory of operation. A producer call that fails on the wire (a reset, a socket timeout) or
while a cluster fails over (``READONLY``, ``MOVED``, ``TRYAGAIN``, ``CLUSTERDOWN``,
``LOADING``) is ambiguous: the server may have applied the admission and lost only its
reply. Every admission carries an id minted by the client once per call (``ids.mint``,
80 random bits) and a second admission of that id writes nothing and answers
``duplicate``, which the plan's answer already reads as "admitted, with this id". So the
producer re-drives the same plan (``Plan.again``: the same steps, the same ids) until
one attempt gets an answer: a duplicate means an earlier attempt landed. A refusal
(``EMQ...``, ``OOM``, a bad argument) is an answer, never retried.

``Retry`` holds the bound: the call keeps retrying for ``retry_for`` of wall time after
its first failure (HOST monotonic clock), with jittered exponential pauses from
``FIRST_PAUSE_S`` up to ``MAX_PAUSE_S``; past it, the last error reaches the caller.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from dataclasses import dataclass

from valkey import exceptions as vexc

from echomq.core import errors

#: the first pause after an ambiguous failure, and the longest one (s)
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0
DEFAULT_RETRY_FOR = dt.timedelta(seconds=10)
#: the replies a failing-over cluster or a restarting server sends: nothing was applied,
#: or (TRYAGAIN, MOVED) the call belongs to a node that is taking over
_FAILOVER = ("READONLY", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "LOADING")


def ambiguous(exc: BaseException) -> bool:
    """Whether ``exc`` leaves an admission's fate unknown, or unapplied only because the
    topology is moving: the faults worth re-sending the same ids for."""
    if isinstance(exc, errors.WireError):
        # refused credentials are an answer (valkey-py files them under connection errors)
        return not isinstance(exc.__cause__, (vexc.AuthenticationError,
                                              vexc.AuthorizationError))
    if isinstance(exc, errors.ServerError) and not isinstance(exc, errors.CrossSlotError):
        return str(exc).split(" ", 1)[0] in _FAILOVER
    return False


@dataclass(frozen=True, slots=True)
class Retry:
    """The retry bound of one app: ``seconds`` of wall time after a call's first ambiguous
    failure (0: off)."""

    seconds: float

    @classmethod
    def of(cls, retry_for: float | dt.timedelta | None) -> Retry:
        """``App(retry_for=)`` checked: a ``timedelta`` or seconds >= 0; ``None`` or 0 is
        off."""
        if retry_for is None:
            return cls(0.0)
        if isinstance(retry_for, dt.timedelta):
            secs = retry_for.total_seconds()
        elif isinstance(retry_for, bool) or not isinstance(retry_for, (int, float)):
            raise TypeError(f"retry_for must be seconds or a timedelta, not "
                            f"{type(retry_for).__name__}")
        else:
            secs = float(retry_for)
        if secs < 0:
            raise ValueError("retry_for must be >= 0")
        return cls(secs)

    def pause(self, exc: BaseException, tries: int, since: float) -> float | None:
        """The pause (s) before try ``tries + 1`` of a call whose first failure was at
        ``since`` (HOST monotonic), or ``None``: raise ``exc`` (not ambiguous, or the bound
        is spent)."""
        if not self.seconds or not ambiguous(exc):
            return None
        left = since + self.seconds - time.monotonic()
        if left <= 0:
            return None
        step = min(MAX_PAUSE_S, FIRST_PAUSE_S * 2 ** min(tries - 1, 10))
        return min(left, random.uniform(step / 2, step))
