"""Admission options a task and a flow node take (``group``, ``unique``; ``priority`` is
``core.guards.priority``), checked at declaration or call time, before any I/O."""

from __future__ import annotations

from collections.abc import Callable

from echomq.core import keyspace

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
