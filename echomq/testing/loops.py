"""Running the kit's coroutines from plain (sync) test code.

A thread with no running event loop keeps one loop of its own for the kit, reused call
after call, so an app's async connector (``App.aconnector``: one per loop) is made once
per test, not once per ``drain``. A thread whose loop is running (an ``async def`` test
calling the sync API) cannot block that loop: the coroutine runs to its end on a fresh
loop in a helper thread, whose connector is closed before it returns.

The kit loop also keeps what a drain would otherwise make again each time: one
``AsyncConnector`` per server (``connector``) and one thread pool for plain-function
handlers (``executor``), both closed by ``shutdown`` (the plugin's session end).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from echomq.connectors.aconnector import AsyncConnector

T = TypeVar("T")

_local = threading.local()


#: threads for plain-function handlers, shared by every drain of the process (a handler
#: abandoned at its timeout keeps one until it returns; a test rarely leaves more)
HANDLER_THREADS = 4
_executor: ThreadPoolExecutor | None = None


def _own_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
        _local.conns = {}
        if threading.current_thread() is threading.main_thread():
            atexit.register(shutdown)  # a unittest run has no session end to close them
    return loop


def executor() -> ThreadPoolExecutor:
    """The kit's thread pool for plain-function handlers (made on first use)."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="echomq-drain")
    return _executor


async def connector(app: Any) -> AsyncConnector:
    """An ``AsyncConnector`` to ``app``'s server for the running loop: on the kit loop one
    per server URL, wire and TLS settings, kept across drains (and tests); on any other
    loop the app's own (``app.aconnector()``)."""
    loop = asyncio.get_running_loop()
    if loop is not getattr(_local, "loop", None):
        own: AsyncConnector = await app.aconnector()
        return own
    tls = getattr(app, "tls", {})
    key = (app.url, app.wire, tuple(sorted(tls.items())))
    conns: dict[Any, AsyncConnector] = _local.conns
    conn = conns.get(key)
    if conn is None:
        conn = conns[key] = await AsyncConnector.connect(app.url, wire=app.wire, **tls)
    return conn


def running() -> bool:
    """Whether an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run(make: Callable[[], Coroutine[Any, Any, T]], app: Any = None) -> T:
    """Run the coroutine ``make()`` returns to its end and return its value: on this
    thread's kit loop, or (a loop runs here) on a fresh loop in a helper thread, where
    ``app``'s connector for that loop is closed at the end."""
    if not running():
        return _own_loop().run_until_complete(make())

    async def once() -> T:
        try:
            return await make()
        finally:
            if app is not None:
                await app.aclose()

    with ThreadPoolExecutor(1, thread_name_prefix="echomq-testing") as pool:
        return pool.submit(asyncio.run, once()).result()


def shutdown() -> None:
    """Close this thread's kit loop and its connectors, and the handler threads (a test
    session's end)."""
    global _executor
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is not None and not loop.is_closed():
        for conn in _local.conns.values():
            with contextlib.suppress(Exception):  # its server may be gone already
                loop.run_until_complete(conn.close())
        _local.conns = {}
        loop.close()
        atexit.unregister(shutdown)
    if _executor is not None:
        _executor.shutdown(wait=False, cancel_futures=True)
        _executor = None


def release(app: Any) -> None:
    """Close ``app``'s async connector on this thread's kit loop, if it made one (the
    plugin's teardown, before ``app.close()``, which only forgets it)."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is not None and not loop.is_closed() and not running():
        loop.run_until_complete(app.aclose())
