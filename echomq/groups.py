"""Groups: fair lanes per tenant, with pauses, concurrency limits and rate limits on the server.

``pause``/``resume``/``set_limit``/``set_rate`` change one group of a queue at once for
every worker; ``stats`` reads them all. Either connector, like the verbs in ``jobs``.
"""

from __future__ import annotations

from echomq.verbs.groups import (
    GroupStats,
    clear_rate,
    pause,
    resume,
    set_limit,
    set_rate,
    stats,
)

__all__ = [
    "GroupStats", "clear_rate", "pause", "resume", "set_limit", "set_rate", "stats",
]
