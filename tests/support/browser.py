"""Debian's chromium under Playwright (never a browser Playwright downloads), for the
browser tests: ``chromium()`` launches it headless, or fails the test when it is missing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = os.environ.get("ECHOMQ_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """A headless chromium for the block; a test fails (never skips) without one."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            b.close()
