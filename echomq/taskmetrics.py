"""Per-task metrics: runs by outcome and a duration histogram, per minute on the server.

``totals(conn, queue)`` since counting began, ``history(conn, queue, tasks, minutes)`` per
minute, ``summarize`` for failure rate and quantiles; ``record`` is what a worker flushes.
"""

from __future__ import annotations

from echomq.verbs.taskmetrics import (
    CODES,
    OUTCOMES,
    History,
    Summary,
    Tally,
    empty,
    history,
    record,
    summarize,
    totals,
)

__all__ = [
    "CODES", "OUTCOMES", "History", "Summary", "Tally", "empty", "history", "record",
    "summarize", "totals",
]
