"""Partitioned queues: one logical queue spread over N queues, each its own hash tag.

One queue lives on one cluster slot (every key under ``{q}``), so one shard bounds it. A
partitioned queue ``mail`` with 8 partitions is the 8 queues ``mail#0`` ... ``mail#7``: each
its own tag, so the cluster spreads them over its primaries, and each is a complete queue
(its own pending, schedule, active, wake list, Metronome lease), so every transition stays
on one slot. A job goes to one partition: by a key's hash (``key_index``: CRC-32, the same in
every process and release, so a key always lands in the same partition and per-key order
holds) or round robin. Workers run a consumer per partition, so each partition gets the same
share of slots and a hot one cannot starve the rest; stats and the dashboard fold the
partitions back into one row (``fold``).

The suffix ``#<digits>`` is reserved for partitions. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

from echomq.core import keyspace

SEP = "#"
MAX_PARTITIONS = 1024
_NAME = re.compile(r"^(?P<base>.+)#(?P<index>0|[1-9][0-9]*)$")


def validate(queue: str, partitions: int) -> int:
    """``partitions`` if ``queue`` can be split that many ways, else raise before any I/O."""
    keyspace.validate_queue(queue)
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise TypeError(f"partitions must be an int, not {type(partitions).__name__}")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be 1..{MAX_PARTITIONS}, not {partitions}")
    if partitions > 1 and _NAME.match(queue):
        raise ValueError(f"queue {queue!r} already ends in a partition suffix (#<n>)")
    keyspace.validate_queue(name(queue, partitions - 1))  # the longest name fits too
    return partitions


def name(queue: str, index: int) -> str:
    """The queue name of partition ``index`` of ``queue``: ``queue#index``."""
    return f"{queue}{SEP}{index}"


def names(queue: str, partitions: int) -> list[str]:
    """Every partition's queue name, in index order (``[queue]`` for one partition)."""
    if partitions == 1:
        return [queue]
    return [name(queue, i) for i in range(partitions)]


def split(queue: str) -> tuple[str, int | None]:
    """``("mail", 3)`` for ``"mail#3"``; ``(queue, None)`` for a queue that is no partition."""
    m = _NAME.match(queue)
    if m is None:
        return queue, None
    return m.group("base"), int(m.group("index"))


def key_index(key: str | bytes | int, partitions: int) -> int:
    """The partition a key belongs to: CRC-32 of its bytes modulo ``partitions`` (stable
    across processes and Python versions, unlike ``hash``)."""
    if isinstance(key, bool) or not isinstance(key, (str, bytes, int)):
        raise TypeError(f"a partition key is a str, bytes or int, not {type(key).__name__}")
    data = key if isinstance(key, bytes) else str(key).encode()
    return zlib.crc32(data) % partitions


def fold(queues: Iterable[str]) -> dict[str, list[str]]:
    """Group queue names by logical queue: ``{"mail": ["mail#0", ...], "q": ["q"]}``,
    partitions in index order, logical names sorted."""
    out: dict[str, list[tuple[int, str]]] = {}
    for q in queues:
        base, index = split(q)
        out.setdefault(base, []).append((-1 if index is None else index, q))
    return {base: [q for _, q in sorted(parts)] for base, parts in sorted(out.items())}


def sum_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Per-state counts of several partitions added up (one row for the logical queue)."""
    total: dict[str, int] = {}
    for c in counts:
        for state, n in c.items():
            total[state] = total.get(state, 0) + int(n)
    return total
