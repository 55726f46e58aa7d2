"""A Worker run inside the test's process: served in a background thread (so the test drives
the sync App API from the main thread) or on the test's own loop, and an event recorder."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from echomq.runtime.events import Event
from echomq.tasks.worker import Worker
from tests.support.polling import wait_for


class Recorder:
    """An ``on_event`` observer that keeps every event with its HOST monotonic arrival."""

    def __init__(self) -> None:
        self.events: list[tuple[float, Event]] = []
        self.lock = threading.Lock()

    def __call__(self, ev: Event) -> None:
        with self.lock:
            self.events.append((time.monotonic(), ev))

    def kinds(self, job_id: str | None = None) -> list[str]:
        with self.lock:
            return [e.kind for _, e in self.events if job_id is None or e.job_id == job_id]

    def first(self, kind: str, job_id: str) -> tuple[float, Event] | None:
        with self.lock:
            return next(((t, e) for t, e in self.events
                         if e.kind == kind and e.job_id == job_id), None)


@contextlib.contextmanager
def serving(app: Any, queues: list[str], **options: Any) -> Iterator[Worker]:
    """Run ``Worker(app, queues, **options)`` on its own loop in a thread until the block
    ends; then stop it and wait for its drain."""
    options.setdefault("beat_ms", 50)
    options.setdefault("grace_s", 2)
    worker = Worker(app, queues, **options)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    result: dict[str, Any] = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            result["unfinished"] = loop.run_until_complete(worker.run(stop))
        except BaseException as exc:  # surfaced to the test below
            result["error"] = exc
        finally:
            loop.close()

    thread = threading.Thread(target=main, name="test-worker", daemon=True)
    thread.start()
    wait_for(lambda: worker.consumers or "error" in result, 10, "worker start")
    try:
        yield worker
    finally:
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        thread.join(15)
        if "error" in result:
            raise result["error"]


async def run_until(worker: Worker, done: Callable[[], Any], timeout: float) -> Any:
    """Run ``worker`` on this loop until ``done()`` holds or ``timeout`` s pass (HOST
    monotonic), then stop it: what ``worker.run`` returned (the jobs left unfinished)."""
    stop = asyncio.Event()
    running = asyncio.ensure_future(worker.run(stop))
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    stop.set()
    return await running
