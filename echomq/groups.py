"""Groups: fair lanes per tenant, with pauses, concurrency limits and rate limits on the server.

``pause``/``resume``/``set_limit``/``set_rate`` change one group of a queue at once for
every worker (``set_defaults``: every group without its own setting); ``stats`` reads them
all. Either connector, like the verbs in ``jobs``.
"""

from __future__ import annotations

from echomq.verbs.groups import (
    GroupDefaults,
    GroupStats,
    check_group_name,
    clear_rate,
    defaults,
    pause,
    resume,
    seen,
    set_defaults,
    set_limit,
    set_rate,
    set_weight,
    stats,
)

__all__ = [
    "GroupDefaults", "GroupStats", "check_group_name", "clear_rate", "defaults", "pause", "resume",
    "seen", "set_defaults", "set_limit", "set_rate", "set_weight", "stats",
]
