"""The doctor: find (and with ``fix=True`` repair) what another client's writes broke.

``check(conn, queue, fix=False)`` returns a ``Finding`` per inconsistency between a queue's
rows and its sets. Either connector.
"""

from __future__ import annotations

from echomq.verbs.doctor import (
    Finding,
    check,
)

__all__ = [
    "Finding", "check",
]
