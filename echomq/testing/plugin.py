"""The pytest plugin (entry point ``pytest11``, loaded wherever echomq is installed):
the ``echomq_url`` and ``echomq_app`` fixtures.

- ``echomq_url`` (session): the URL of one ephemeral embedded server for the whole test
  session, started the first time a test asks for it (a session that never asks starts
  nothing) and stopped at the session's end. Under pytest-xdist every worker process is
  its own session, so it gets its own server: workers share no keys.
- ``echomq_app`` (per test): an ``App`` on that server, made for the test and closed
  after it, so each test declares its own tasks. The keyspace is clean for each test: the
  server's database is flushed (``FLUSHDB``, a fraction of a millisecond; loaded scripts
  survive it) before the test runs, so nothing a test left behind, and nothing another
  test enqueued, is seen. To keep a test in the milliseconds, the apps share the
  session's connectors (the sync one for enqueues and reads, the kit's async one for
  ``testing.drain``) instead of connecting anew per test.

Another plugin or a conftest may define fixtures of their own names next to these (the
repository's own ``server``, ``url`` and ``app`` are untouched): nothing here is named
like them. ``-p no:echomq.testing.plugin`` turns the plugin off.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq.connectors.connector import Connector
from echomq.core import keyspace
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.app import App
from echomq.testing import loops
from echomq.testing.wipe import flush


class SessionApp(App):
    """An ``App`` whose sync connector is the session's (``session_conn``), made once and
    kept across tests: ``close()`` leaves it open."""

    def __init__(self, url: str, session_conn: Connector) -> None:
        super().__init__(url, wire=session_conn.wire)
        self.session_url, self.session_conn = url, session_conn

    def connector(self, queue: str | None = None) -> Connector:
        if self.url != self.session_url:  # a test pointed it elsewhere: its own connector
            return super().connector(queue)
        if queue is not None:
            keyspace.validate_queue(queue)
        return self.session_conn


@pytest.fixture(scope="session")
def echomq_url() -> Iterator[str]:
    """The URL of this session's (this xdist worker's) ephemeral embedded server."""
    server = EmbeddedServer(ephemeral=True)
    server.start()
    try:
        yield server.url
    finally:
        loops.shutdown()
        server.stop()


@pytest.fixture(scope="session")
def _echomq_conn(echomq_url: str) -> Iterator[Connector]:
    """The session's sync connector: the per-test flush and every test app's enqueues."""
    conn = Connector.connect(echomq_url)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def echomq_app(echomq_url: str, _echomq_conn: Connector) -> Iterator[App]:
    """An ``App`` on the session's server, on an empty keyspace (flushed before the test)."""
    app = SessionApp(echomq_url, _echomq_conn)
    flush(app)
    try:
        yield app
    finally:
        loops.release(app)
        app.close()
