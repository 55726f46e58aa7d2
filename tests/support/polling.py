"""Waiting, on the HOST monotonic clock, until a condition holds: the one way every test
waits for something another thread, process or server does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


def _failed(what: str, timeout: float, detail: Callable[[], str] | None) -> AssertionError:
    text = f"{what} not reached in {timeout} s"
    return AssertionError(f"{text}\n{detail()}" if detail else text)


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition", *,
             every: float = 0.01, detail: Callable[[], str] | None = None) -> Any:
    """Poll ``pred`` every ``every`` s until it returns something truthy (returned), or raise
    ``AssertionError`` naming ``what`` once ``timeout`` s passed (``detail()`` appended: what
    the test saw, read only on failure)."""
    deadline = time.monotonic() + timeout
    while not (got := pred()):
        if time.monotonic() > deadline:
            raise _failed(what, timeout, detail)
        time.sleep(every)
    return got


async def until(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition", *,
                every: float = 0.02, detail: Callable[[], str] | None = None) -> Any:
    """``wait_for`` on a running loop: sleeps with ``asyncio.sleep`` so the loop's own
    tasks (the consumer under test) run between polls."""
    deadline = time.monotonic() + timeout
    while not (got := pred()):
        if time.monotonic() > deadline:
            raise _failed(what, timeout, detail)
        await asyncio.sleep(every)
    return got
