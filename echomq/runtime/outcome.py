"""How one run of a job ended: the outcome a ``Runner`` returns and a ``Settler`` records.

One variant per way a run ends, each carrying what its settlement needs: ``Completed`` the
JSON text the ack keeps (``None`` when the route keeps no result), ``Failed`` and
``TimedOut`` the error whose text the retry records, ``Delayed`` the run-at of the delay
transition, ``Limited`` the span its group (or queue) claims nothing, ``Cancelled``
nothing. ``Suspended`` is the job that parked itself at a durable step (a sleep, or a wait
for a signal; ``echomq.runtime.durable``): the step's script already made the transition,
so the settler only reports it.

``kind`` is the outcome's name in the ``lost`` and ``settled`` events (``ok``, ``fail``,
``timeout``, ``delay``, ``rate_limited``, ``cancelled``, ``suspended``). The settler
matches on the type, in one place (``Settler.plan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class Completed:
    """The handler returned: acked (with ``result``, the JSON text of its return value,
    kept when the route keeps results)."""

    result: str | bytes | None = None  # bytes: coded by the app's codec (``Encoded``)
    kind: ClassVar[str] = "ok"


@dataclass(frozen=True, slots=True)
class Failed:
    """The handler raised ``error`` (or no route fits the job): retried by the route's
    policy, or dead."""

    error: BaseException
    kind: ClassVar[str] = "fail"


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The handler ran past its timeout: a failure whose text ``error`` says so."""

    error: TimeoutError
    kind: ClassVar[str] = "timeout"


@dataclass(frozen=True, slots=True)
class Delayed:
    """Back to the schedule without a failure: ``mode`` ``in`` (``value`` ms from SERVER
    now) or ``at`` (``value`` an epoch ms). ``handed_back``: another app's job sent back
    for the worker that serves its task (counted and reported as such)."""

    mode: str
    value: int
    handed_back: bool = False
    kind: ClassVar[str] = "delay"


@dataclass(frozen=True, slots=True)
class Limited:
    """The handler met an upstream limit: back to the front of its lane, its group (or the
    queue) claiming nothing for ``ms`` (SERVER clock)."""

    ms: int
    kind: ClassVar[str] = "rate_limited"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A cancel request stopped the run: the job ends cancelled."""

    kind: ClassVar[str] = "cancelled"


@dataclass(frozen=True, slots=True)
class Suspended:
    """The job parked itself at durable step ``step`` and left its slot without spending an
    attempt: ``state`` ``sleeping`` (until ``wake_ms``, SERVER epoch ms) or ``waiting``
    for ``signal`` (its timeout ``wake_ms``, ``None``: none), or ``cancelled`` (a cancel
    was requested while it ran: the step's script ended it cancelled instead). The
    step's script made the transition (and counted the delay): nothing is left to record."""

    step: str
    wake_ms: int | None = None
    signal: str | None = None
    state: str = "sleeping"
    kind: ClassVar[str] = "suspended"


Outcome = Completed | Failed | TimedOut | Delayed | Limited | Cancelled | Suspended

#: the outcome of most runs: a success whose route keeps no result (made once)
DONE = Completed()
CANCELLED = Cancelled()
