"""The kit's direct tests: an ``App`` on the session's shared server (``url``); each test
declares its tasks on its own ``queue``, so tests share the server without sharing jobs.
The plugin's own fixtures are tested on generated suites (test_plugin.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq.tasks.app import App


@pytest.fixture
def kit(url: str) -> Iterator[App]:
    a = App(url)
    yield a
    a.close()


# the plugin's fixtures, for the tests here that use the kit as a project would (a
# conftest import: the plugin is loaded by its entry point only where echomq is installed)
from echomq.testing.plugin import _echomq_conn, echomq_app, echomq_url  # noqa: E402, F401
