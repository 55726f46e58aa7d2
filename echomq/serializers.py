"""The default serializer (``App(serializer=...)``): JSON plus tagged datetime, date, time,
timedelta, UUID, Decimal, bytes, sets, Enum, dataclasses and pydantic models; ``register``
names a class for decoding (``echomq.core.serial``)."""

from __future__ import annotations

from echomq.core.serial import TAG, TagError, annotated, dumps, loads, register, tag, untag

__all__ = ["TAG", "TagError", "annotated", "dumps", "loads", "register", "tag", "untag"]
