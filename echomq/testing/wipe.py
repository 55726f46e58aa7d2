"""``flush``: an empty keyspace for the next test, outside pytest (unittest, Django)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from echomq.verbs import registry, testbed

if TYPE_CHECKING:
    from echomq.tasks.app import App


def flush(app: App) -> None:
    """Delete every key of ``app``'s server database (``FLUSHDB``; loaded scripts stay),
    and forget the queues its connector registered. For a TEST server only: the pytest
    plugin's ``echomq_app`` does this before every test."""
    conn = app.connector()
    testbed.flush(conn)
    registry.forget(conn)  # the flush wiped the queue registry it had noted
