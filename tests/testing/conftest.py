"""The kit's direct tests: an ``App`` on the session's shared server (``url``); each test
declares its tasks on its own ``queue``, so tests share the server without sharing jobs.
The plugin's fixtures (``echomq_url``, ``echomq_app``: pyproject's addopts load it) serve the
tests that use the kit as a project would; the plugin itself is tested on generated suites
(test_plugin.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq.tasks.app import App


@pytest.fixture
def kit(url: str) -> Iterator[App]:
    a = App(url)
    yield a
    a.close()

