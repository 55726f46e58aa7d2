"""Admission options a task and a flow node take (``group``, ``unique``, ``expires``,
``debounce``; ``priority`` is ``core.guards.priority``), checked at declaration or call
time, before any I/O."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.times import epoch_ms, to_ms

# a unique key is part of a server key name (emq:{q}:unique:<key>), so it is bounded in the
# bytes the server stores, not in characters
MAX_UNIQUE_BYTES = 1000


Group = str | Callable[..., str | None]


def check_group(group: object) -> Group:
    """A task's group: a valid group name (the rules of a queue name) or a function of the
    task's arguments that returns one; checked at declaration, before any I/O."""
    if callable(group):
        return group
    if not isinstance(group, str):
        raise TypeError(f"group must be a str or a function of the task's arguments, "
                        f"not {type(group).__name__}")
    return keyspace.validate_group(group)


def check_unique(key: object) -> str:
    """A unique key: a non-empty str of at most ``MAX_UNIQUE_BYTES`` bytes in UTF-8."""
    if not isinstance(key, str):
        raise TypeError(f"unique must be a str key, not {type(key).__name__}")
    if not key or len(key.encode()) > MAX_UNIQUE_BYTES:
        raise ValueError(f"unique must be 1..{MAX_UNIQUE_BYTES} bytes (UTF-8), got {key!r:.40}")
    return key


class Deadline(NamedTuple):
    """A job's deadline: ``ms`` after its admission (``"in"``, SERVER clock) or an instant
    in epoch ms (``"at"``, the caller's clock)."""

    mode: str
    value: int

    def kwargs(self) -> dict[str, int]:
        """The ``jobs.admit`` keywords for it."""
        return {"expires_ms" if self.mode == "in" else "expires_at_ms": self.value}


def check_expires(value: object) -> Deadline:
    """``expires=``: ms (int) or a ``timedelta`` after admission, or a ``datetime`` (naive =
    local time). ``TypeError``/``ValueError`` before any I/O."""
    if isinstance(value, dt.datetime):
        return Deadline("at", guard.instant("expires", epoch_ms(value)))
    if isinstance(value, dt.timedelta) or (isinstance(value, int) and not isinstance(value, bool)):
        return Deadline("in", guard.span("expires", to_ms(value), minimum=1))
    raise TypeError(f"expires must be ms (int), a timedelta or a datetime, "
                    f"not {type(value).__name__}")


class Debounce(NamedTuple):
    """``debounce=``: calls with ``key`` while its job waits fold into that job; each moves
    its run-at to ``ms`` after the call, never past ``max_ms`` after the first call."""

    key: str
    ms: int
    max_ms: int | None


def check_debounce(key: object, ms: object, max_ms: object) -> Debounce:
    """A debounce key (the rules of a unique key), ``debounce_ms`` >= 1 and
    ``debounce_max_ms`` (``None``: no cap) >= ``debounce_ms``; ms or ``timedelta``."""
    name = check_unique(key)
    if ms is None:
        raise ValueError("debounce needs debounce_ms (the quiet period after the last call)")
    if not isinstance(ms, (int, dt.timedelta)) or isinstance(ms, bool):
        raise TypeError(f"debounce_ms must be ms (int) or a timedelta, not {type(ms).__name__}")
    span = guard.span("debounce_ms", to_ms(ms), minimum=1)
    cap = None
    if max_ms is not None:
        if not isinstance(max_ms, (int, dt.timedelta)) or isinstance(max_ms, bool):
            raise TypeError(f"debounce_max_ms must be ms (int) or a timedelta, "
                            f"not {type(max_ms).__name__}")
        cap = guard.span("debounce_max_ms", to_ms(max_ms), minimum=1)
        if cap < span:
            raise ValueError(f"debounce_max_ms ({cap}) must be at least debounce_ms ({span})")
    return Debounce(name, span, cap)
