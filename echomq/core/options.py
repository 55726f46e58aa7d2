"""Admission options a task and a flow node take (``priority``, ``group``, ``unique``),
checked at declaration or call time, before any I/O."""

from __future__ import annotations

from collections.abc import Callable

from echomq.core import keyspace

MAX_PRIORITY = 1_000_000
MAX_UNIQUE_CHARS = 512


def check_priority(priority: object) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be 0..{MAX_PRIORITY} (lower runs first), "
                         f"got {priority}")
    return priority


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
    if not isinstance(key, str):
        raise TypeError(f"unique must be a str key, not {type(key).__name__}")
    if not key or len(key) > MAX_UNIQUE_CHARS:
        raise ValueError(f"unique must be 1..{MAX_UNIQUE_CHARS} characters")
    return key
