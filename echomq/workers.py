"""Live workers: who runs what now, and the quiet/stop requests the CLI sends.

``live(conn)`` lists the registered workers (``WorkerRecord``: id, host, pid, queues,
concurrency, busy, state); ``request(conn, worker_id, "quiet" | "stop")``. Either connector.
"""

from __future__ import annotations

from echomq.verbs.workers import (
    ACTIONS,
    STATES,
    Running,
    WorkerRecord,
    live,
    request,
)

__all__ = [
    "ACTIONS", "STATES", "Running", "WorkerRecord", "live", "request",
]
