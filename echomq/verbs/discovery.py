"""Queue discovery: which queues exist, found by their sorted sets, on every primary.

No queue's script can keep a registry key in step (it would sit outside every queue's
hash tag; ``registry`` keeps one by a separate verb, for the writers that go through an
App, the CLI or a worker), so for every queue, however written, its sorted sets are its
existence: ``SCAN ... TYPE zset`` for ``emq:{*}:*``. On a cluster each primary holds only
the queues of its slots, so the scan runs on every primary with its own cursor (the
``Nodes`` step names them) and the names are merged. A budget bounds the keys looked at
per node: a dashboard must not stall a server.

``queues(conn)`` lists raw queue names (a partitioned queue shows as ``mail#0`` ...
``mail#7``); ``echomq.core.partitions.fold`` groups them into their logical queue.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Command, Nodes, Verb, verb

SCAN_BUDGET = 200_000
SCAN_COUNT = 1000
_NAME = re.compile(rb"^emq:\{(.+)\}:[a-z]+$")
#: sorted sets under the key pattern that belong to no queue: the live worker registry's
#: index (a queue named ``workers`` is still found by its own sets)
_NOT_QUEUES = frozenset({keyspace.workers_key("index").encode()})


def _scan_reply(reply: Any) -> tuple[int, list[bytes]]:
    cursor, keys = reply
    if isinstance(cursor, dict):  # the cluster client keys a SCAN cursor by node
        cursor = next(iter(cursor.values()), 0)
    return int(cursor), list(keys)


@verb
def queues(
    budget: int = SCAN_BUDGET,
    progress: Callable[[int, int], None] | None = None,
) -> Verb[list[str]]:
    """Every queue name with at least one sorted set, sorted; on a cluster, across every
    primary. At most ``budget`` keys are looked at per node. ``progress(scanned, found)``
    is called after each SCAN round trip (for a progress line)."""
    guard.positive("budget", budget)
    found: set[str] = set()
    scanned = 0
    for node in (yield Nodes()):
        cursor, seen = 0, 0
        while True:
            reply = yield Command(("SCAN", cursor, "MATCH", "emq:{*}:*", "COUNT", SCAN_COUNT,
                                   "TYPE", "zset"), node=node)
            cursor, keys = _scan_reply(reply)
            scanned += len(keys)
            for key in keys:
                raw = key if isinstance(key, bytes) else str(key).encode()
                if raw in _NOT_QUEUES:
                    continue
                m = _NAME.match(raw)
                if m:
                    found.add(m.group(1).decode())
            if progress is not None:
                progress(scanned, len(found))
            seen += SCAN_COUNT
            if cursor == 0 or seen >= budget:
                break
    return sorted(found)
