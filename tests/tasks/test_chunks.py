"""Chunks: the handler called once with up to `chunk` jobs; a returned {job_id: exc}
fails those alone (each by its own retry policy), raising fails them all; each job is
settled on its own."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest

from echomq.tasks.worker import Worker
from echomq.verbs import jobs
from tests.support.workers import run_until


def _serve(app, queue, done, timeout=20):
    async def main() -> None:
        worker = Worker(app, [queue], concurrency=4, beat_ms=50, grace_s=2)
        assert await run_until(worker, done, timeout) == 0

    asyncio.run(main())


def test_a_chunk_task_gets_its_jobs_in_lists(app, queue):
    calls: list[list[int]] = []
    lock = threading.Lock()

    @app.task(queue=queue, name="c_index", chunk=10, chunk_wait=dt.timedelta(milliseconds=200))
    def index(items):
        with lock:
            calls.append([job.args[0] for job in items])

    ids = index.enqueue_many([(i,) for i in range(25)])
    _serve(app, queue, lambda: sum(map(len, calls)) >= 25)
    assert sorted(n for c in calls for n in c) == list(range(25))
    assert max(map(len, calls)) == 10  # the worker got 10 slots for the chunk, not 4
    assert len(calls) <= 5
    counts = jobs.counts(app.connector(), queue)
    assert counts["pending"] == 0 and counts["dead"] == 0
    assert all(app.job(i) is None or app.job(i).state == "completed" for i in ids)


def test_a_returned_dict_fails_those_jobs_alone(app, queue):
    seen: dict[int, int] = {}
    lock = threading.Lock()

    @app.task(queue=queue, name="c_part", chunk=5, chunk_wait=0.1, max_attempts=1)
    def part(items):
        with lock:
            for job in items:
                seen[job.args[0]] = seen.get(job.args[0], 0) + 1
        return {job.id: ValueError(f"bad {job.args[0]}") for job in items
                if job.args[0] % 2}

    part.enqueue_many([(i,) for i in range(5)])
    conn = app.connector()
    _serve(app, queue, lambda: jobs.counts(conn, queue)["dead"] >= 2 and len(seen) >= 5)
    counts = jobs.counts(conn, queue)
    assert counts["dead"] == 2  # 1 and 3, each dead after its one attempt
    assert counts["pending"] == 0 and counts["active"] == 0


def test_raising_fails_the_whole_chunk_and_each_job_retries_on_its_own(app, queue):
    runs: list[int] = []
    lock = threading.Lock()

    @app.task(queue=queue, name="c_all", chunk=3, chunk_wait=0.1, max_attempts=2,
              retry_delay_ms=0)
    def fails(items):
        with lock:
            runs.append(len(items))
        raise RuntimeError("down")

    fails.enqueue_many([(i,) for i in range(3)])
    conn = app.connector()
    _serve(app, queue, lambda: jobs.counts(conn, queue)["dead"] >= 3)
    assert sum(runs) == 6  # every job ran twice (its own budget), then died


def test_chunk_options_are_checked(app, queue):
    with pytest.raises(ValueError):
        app.task(queue=queue, name="c_bad", chunk=0)(lambda items: None)
