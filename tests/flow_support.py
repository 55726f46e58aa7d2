"""Shared by the flow tests: queue names whose slots sit on different cluster shards."""

from __future__ import annotations

import uuid
from typing import Any

from echomq import keyspace


def spread_queues(cluster: Any, n: int, prefix: str = "fx-") -> list[str]:
    """``n`` fresh queue names whose slots live on ``n`` different primaries
    (``LocalCluster.owner``), so a flow over them crosses shards."""
    out: list[str] = []
    owners: set[int] = set()
    while len(out) < n:
        q = prefix + uuid.uuid4().hex[:8]
        port = cluster.owner(keyspace.queue_key(q, "pending")).port
        if port not in owners:
            owners.add(port)
            out.append(q)
    return out
