"""Key names: every key of a queue lives under one hash tag, ``emq:{<queue>}:``.

``job_key(queue, id)``, ``queue_key(queue, "schedule")`` and the other builders name the
keys the verbs touch; the key table is in the reference (Keys).
"""

from __future__ import annotations

from echomq.core.keyspace import (
    MAX_QUEUE_BYTES,
    PREFIX,
    WORKERS_TAG,
    base,
    batch_key,
    group_key,
    job_key,
    lane_key,
    queue_key,
    registry_key,
    repeat_key,
    signal_key,
    validate_group,
    validate_queue,
    waiters_key,
    worker_key,
    workers_key,
)

__all__ = [
    "MAX_QUEUE_BYTES", "PREFIX", "WORKERS_TAG", "base", "batch_key", "group_key", "job_key",
    "lane_key", "queue_key", "registry_key", "repeat_key", "signal_key", "validate_group",
    "validate_queue", "waiters_key",
    "worker_key", "workers_key",
]
