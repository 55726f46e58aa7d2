"""``steps.drive``'s two additions, on the real connectors: a ``Pause`` step sleeps in the
driver (``time.sleep`` sync, ``asyncio.sleep`` async: the loop runs others meanwhile)
and sends nothing; a lost connection is thrown back into the verb at the ``yield`` that
caused it, as a refusal is, so the verb may try again."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import AsyncConnector, Connector, errors
from echomq.core.steps import Command, Pause, Verb, drive
from tests.support.faults import FaultProxy


def _paused(seconds: float) -> Verb[tuple[Any, Any, Any]]:
    before = yield Command(("PING",))
    slept = yield Pause(seconds)
    after = yield Command(("PING",))
    return before, slept, after


def test_a_pause_sleeps_in_the_sync_driver_and_replies_none(conn: Connector) -> None:
    t0 = time.monotonic()
    before, slept, after = drive(conn, _paused(0.2))
    took = time.monotonic() - t0
    assert (before, slept, after) in ((b"PONG", None, b"PONG"), ("PONG", None, "PONG"),
                                      (True, None, True))
    assert took >= 0.2


def test_a_pause_awaits_in_the_async_driver_and_lets_the_loop_run(url: str) -> None:
    async def go() -> tuple[float, int]:
        aconn = await AsyncConnector.connect(url)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        try:
            t0 = time.monotonic()
            _, slept, _ = await drive(aconn, _paused(0.2))
            assert slept is None
            return time.monotonic() - t0, ticks
        finally:
            ticker.cancel()
            await aconn.close()

    took, ticks = asyncio.run(go())
    assert took >= 0.2
    assert ticks >= 5  # a blocking sleep would have let none run


@pytest.fixture
def proxy(server: Any) -> Iterator[FaultProxy]:
    with FaultProxy.to(server.url) as px:
        yield px


def _tries(limit: int, seen: list[BaseException]) -> Verb[Any]:
    """PING until one answers, at most ``limit`` tries, pausing between them: what a verb
    that retries its own lost calls looks like."""
    for _ in range(limit):
        try:
            return (yield Command(("PING",)))
        except errors.WireError as exc:
            seen.append(exc)
            yield Pause(0.05)
    raise AssertionError("never answered")


def test_a_lost_connection_is_thrown_into_the_verb_sync(proxy: FaultProxy) -> None:
    conn = Connector.connect(proxy.url(), socket_timeout=0.2)
    try:
        seen: list[BaseException] = []
        proxy.blackhole()
        threading.Timer(0.5, proxy.heal).start()
        assert drive(conn, _tries(40, seen)) in (b"PONG", "PONG", True)
        assert seen and all(isinstance(e, errors.WireError) for e in seen)
    finally:
        conn.close()


def test_a_lost_connection_is_thrown_into_the_verb_async(proxy: FaultProxy) -> None:
    async def go() -> tuple[Any, list[BaseException]]:
        aconn = await AsyncConnector.connect(proxy.url(), socket_timeout=0.2)
        try:
            seen: list[BaseException] = []
            proxy.blackhole()
            asyncio.get_running_loop().call_later(0.5, proxy.heal)
            return await drive(aconn, _tries(40, seen)), seen
        finally:
            await aconn.close()

    got, seen = asyncio.run(go())
    assert got in (b"PONG", "PONG", True)
    assert seen and all(isinstance(e, errors.WireError) for e in seen)


def test_an_unhandled_lost_connection_still_reaches_the_caller(proxy: FaultProxy) -> None:
    conn = Connector.connect(proxy.url(), socket_timeout=0.2)
    closed: list[bool] = []

    def verb() -> Verb[Any]:
        try:
            return (yield Command(("PING",)))
        finally:
            closed.append(True)  # thrown in: the verb's own cleanup runs at once

    try:
        proxy.blackhole()
        with pytest.raises(errors.WireError):
            drive(conn, verb())
        assert closed == [True]
    finally:
        proxy.heal()
        conn.close()
