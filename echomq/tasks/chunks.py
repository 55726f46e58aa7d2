"""Chunks: ``@app.task(chunk=100, chunk_wait=timedelta(seconds=1))`` calls the handler once
with up to 100 of the task's jobs (a list of ``Job``; ``job.args``/``job.kwargs`` are each
one's arguments).

Each job is claimed, leased and acked on its own row (its state and history stay per job):
the worker gathers the jobs of the task it holds until ``chunk`` of them wait or
``chunk_wait`` passed since the first (HOST monotonic, the event loop's clock), then calls
the handler once (a plain function in a thread, as every handler). A worker runs them on
its consumers' chunk path (``echomq.runtime.chunking``: one call and one ``ack_many`` per
chunk, no per-job task, event or task count for the jobs that complete); a job that needs
a per-job run (a failed one, a flow node's, one with a per-call timeout) and a chunk task
with callbacks, ``isolation="process"`` or a ``timeout`` gather per job instead
(``Chunker.join``: each job's handler waits for its chunk's call). What it does decides
each job's outcome: returning ``None`` (or an empty dict) completes them all; returning
``{job_id: exc}`` fails those jobs alone, each by its own retry policy, and completes the
rest; raising fails them all with that error. A dict naming an id not in the chunk fails
the whole chunk with a ``ValueError``. A chunk fills from the worker's slots: a worker
serving the task's queue gets at least twice ``chunk`` slots there (``widest``). Return values
are not kept (``keep_result`` does not apply to a chunk).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from echomq.runtime.handler import Job


class Chunker:
    """The jobs of one chunk task gathered on this worker's loop, and the handler's calls:
    ``run`` is the chunk path's (``echomq.runtime.chunking``), ``join`` the per-job way's."""

    def __init__(self, fn: Callable[..., Any], size: int, wait_ms: int) -> None:
        self.fn, self.size, self.wait_s = fn, size, wait_ms / 1000
        self.is_async = inspect.iscoroutinefunction(fn)
        self._waiting: list[tuple[Job, asyncio.Future[None]]] = []
        self._timer: asyncio.TimerHandle | None = None
        #: the outcomes the chunk path decided for jobs it hands to their per-job run
        self._held: dict[str, BaseException] = {}

    async def run(self, jobs: list[Job]) -> dict[str, BaseException]:
        """Call the handler once with ``jobs``: the ones it failed (all of them, with its
        error, when it raised)."""
        try:
            if self.is_async:
                got = await self.fn(jobs)
            else:
                got = await asyncio.to_thread(self.fn, jobs)
            return _failures(got, {job.id for job in jobs})
        except Exception as exc:
            return {job.id: exc for job in jobs}

    def hold(self, job_id: str, error: BaseException) -> None:
        """``job_id``'s outcome, decided by its chunk's call: its per-job run raises it."""
        self._held[job_id] = error

    async def join(self, job: Job) -> None:
        """``job``'s handler: wait for its chunk's call, then its own outcome (returns for
        a completion, raises its error for a failure). A job whose chunk already ran on the
        chunk path raises the error held for it."""
        held = self._held.pop(job.id, None)
        if held is not None:
            raise held
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
        failed = await self.run([job for job, _ in live])
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
    """The slots a worker gives ``queue`` for its chunk tasks (0: none): two of the largest
    ``chunk`` of the tasks of ``app`` (an ``App``) there, so one chunk fills while the one
    before it runs."""
    return 2 * max((t.defaults.chunk or 0 for t in app.registry.on(queue)), default=0)


def handlers(app: Any, queue: str) -> dict[str, Chunker]:
    """The chunk tasks of ``app`` on ``queue`` a consumer runs on its chunk path (by name):
    those without what a per-job run gives (callbacks, a process of their own, a timeout)."""
    out: dict[str, Chunker] = {}
    for task in app.registry.on(queue):
        d = task.defaults
        if (task.chunker is None or task.ref is not None
                or d.timeout_ms is not None or d.on_success is not None
                or d.on_failure is not None or d.on_retry is not None):
            continue
        out[task.name] = task.chunker
    return out
