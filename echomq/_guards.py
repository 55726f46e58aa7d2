"""Argument guards that run before any I/O (the seed's function-head guards)."""

from __future__ import annotations


def integer(name: str, value: object) -> int:
    """``value`` if it is an int (not a bool), else ``TypeError``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def non_negative(name: str, value: object) -> int:
    if integer(name, value) < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value  # type: ignore[return-value]


def positive(name: str, value: object) -> int:
    if integer(name, value) < 1:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value  # type: ignore[return-value]


def string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def payload(value: object, name: str = "payload") -> bytes | str:
    if not isinstance(value, (bytes, str)):
        raise TypeError(f"{name} must be bytes or str, not {type(value).__name__}")
    return value


def mode(value: object) -> str:
    if value != "in" and value != "at":
        raise ValueError(f"mode must be 'in' or 'at', not {value!r}")
    return str(value)


MAX_PRIORITY = 1_000_000


def priority(value: object) -> int:
    """A job priority: an int 0..1_000_000 (lower runs first)."""
    if integer("priority", value) < 0 or value > MAX_PRIORITY:  # type: ignore[operator]
        raise ValueError(f"priority must be 0..{MAX_PRIORITY}, got {value}")
    return value  # type: ignore[return-value]
