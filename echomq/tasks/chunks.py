"""Chunks: ``@app.task(chunk=100, chunk_wait=timedelta(seconds=1))`` calls the handler once
with up to 100 of the task's jobs (a list of ``Job``; ``job.args``/``job.kwargs`` are each
one's arguments).

Each job is claimed, leased, settled, counted and recorded on its own, as any job is: the
worker gathers the jobs of the task it holds (``Chunker``) until ``chunk`` of them wait or
``chunk_wait`` passed since the first (HOST monotonic, the event loop's clock), then calls
the handler once (a plain function in a thread, as every handler). What it does decides
each job's outcome: returning ``None`` (or an empty dict) completes them all; returning
``{job_id: exc}`` fails those jobs alone, each by its own retry policy, and completes the
rest; raising fails them all with that error. A dict naming an id not in the chunk fails
the whole chunk with a ``ValueError``. A chunk fills from the worker's slots: a worker
serving the task's queue gets at least ``chunk`` slots there (``widest``). Return values
are not kept (``keep_result`` does not apply to a chunk).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from echomq.runtime.handler import Job


class Chunker:
    """The jobs of one chunk task gathered on this worker's loop, and the handler's calls."""

    def __init__(self, fn: Callable[..., Any], size: int, wait_ms: int) -> None:
        self.fn, self.size, self.wait_s = fn, size, wait_ms / 1000
        self.is_async = inspect.iscoroutinefunction(fn)
        self._waiting: list[tuple[Job, asyncio.Future[None]]] = []
        self._timer: asyncio.TimerHandle | None = None

    async def join(self, job: Job) -> None:
        """``job``'s handler: wait for its chunk's call, then its own outcome (returns for
        a completion, raises its error for a failure)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._waiting.append((job, done))
        if len(self._waiting) >= self.size:
            self._fire()
        elif self._timer is None:
            self._timer = loop.call_later(self.wait_s, self._fire)
        await done

    def _fire(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        chunk, self._waiting = self._waiting, []
        if chunk:
            asyncio.get_running_loop().create_task(self._call(chunk))

    async def _call(self, chunk: list[tuple[Job, asyncio.Future[None]]]) -> None:
        live = [(job, done) for job, done in chunk if not done.done()]  # drained ones left
        jobs = [job for job, _ in live]
        try:
            if self.is_async:
                got = await self.fn(jobs)
            else:
                got = await asyncio.to_thread(self.fn, jobs)
            failed = _failures(got, {job.id for job in jobs})
        except Exception as exc:
            for _, done in live:
                if not done.done():
                    done.set_exception(exc)
            return
        for job, done in live:
            if done.done():
                continue
            if job.id in failed:
                done.set_exception(failed[job.id])
            else:
                done.set_result(None)


def _failures(got: Any, ids: set[str]) -> dict[str, BaseException]:
    """The handler's return value as the failed jobs (``None``/``{}``: none)."""
    if not got:
        return {}
    if not isinstance(got, dict):
        raise TypeError(f"a chunk handler returns None or {{job_id: exception}}, not "
                        f"{type(got).__name__}")
    unknown = got.keys() - ids
    if unknown:
        raise ValueError(f"a chunk handler failed job(s) not in its chunk: {sorted(unknown)}")
    out: dict[str, BaseException] = {}
    for job_id, exc in got.items():
        out[job_id] = exc if isinstance(exc, BaseException) else RuntimeError(str(exc))
    return out


def widest(app: Any, queue: str) -> int:
    """The largest ``chunk`` of the tasks of ``app`` (an ``App``) on ``queue`` (0: none)."""
    return max((t.defaults.chunk or 0 for t in app.registry.on(queue)), default=0)
