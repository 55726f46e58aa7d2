"""The dead-letter set: list what died and why, and send jobs back for a fresh run.

Each verb takes a ``Connector`` (and returns the result) or an ``AsyncConnector`` (and
returns an awaitable of it), like the verbs in ``jobs``.
"""

from __future__ import annotations

from echomq.verbs.dead import (
    count,
    list_dead,
    revive,
    revive_all,
)

__all__ = [
    "count", "list_dead", "revive", "revive_all",
]
