"""The verb tests' own fixture: ``run_script`` is ``run`` on wire 4 only, for the scripts'
side of the documented native divergences (which tests/native/test_native_divergence.py
checks from the other side)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.clients import Runner


@pytest.fixture(params=["sync", "async"])
def run_script(request: pytest.FixtureRequest, url: str) -> Iterator[Runner]:
    r = Runner(request.param, url, wire=4)
    yield r
    r.close()
