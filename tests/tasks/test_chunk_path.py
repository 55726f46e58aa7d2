"""The chunk path (``echomq.runtime.chunking``): a worker runs a chunk task's jobs a chunk
at a time (one handler call, one ack for the completed ones, no per-job run), hands the
failed ones to their per-job run with their verdicts, and leaves to the per-job way what
needs it (a task with callbacks)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

from echomq.tasks.worker import Worker
from echomq.verbs import jobs
from tests.support.workers import Recorder, run_until


def _serve(app, queue, done, on_event=None, timeout=20):
    async def main() -> Worker:
        worker = Worker(app, [queue], concurrency=4, beat_ms=50, grace_s=2, on_event=on_event)
        assert await run_until(worker, done, timeout) == 0
        return worker

    return asyncio.run(main())


def test_completed_chunk_jobs_skip_the_per_job_run(app, queue):
    calls: list[int] = []
    lock = threading.Lock()
    seen = Recorder()

    @app.task(queue=queue, name="cp_index", chunk=20, chunk_wait=dt.timedelta(milliseconds=100))
    def index(items):
        with lock:
            calls.append(len(items))

    ids = index.enqueue_many([(i,) for i in range(60)])
    conn = app.connector()
    _serve(app, queue, lambda: jobs.counts(conn, queue)["pending"] == 0 and sum(calls) >= 60
           and jobs.counts(conn, queue)["active"] == 0, on_event=seen)
    assert sum(calls) == 60 and max(calls) == 20
    assert all(app.job(i) is None for i in ids)  # acked: rows deleted, as any completion
    # no per-job run: none of the jobs was started, counted or reported one by one
    assert not any(kind == "started" for kind in seen.kinds())
    assert jobs.counts(conn, queue)["dead"] == 0


def test_a_failed_chunk_job_dies_with_its_own_error_by_its_own_budget(app, queue):
    runs: dict[int, int] = {}
    lock = threading.Lock()
    seen = Recorder()

    @app.task(queue=queue, name="cp_part", chunk=4, chunk_wait=0.1, max_attempts=2,
              retry_delay_ms=0)
    def part(items):
        with lock:
            for job in items:
                runs[job.args[0]] = runs.get(job.args[0], 0) + 1
        return {job.id: ValueError(f"bad {job.args[0]}") for job in items if job.args[0] == 2}

    ids = part.enqueue_many([(i,) for i in range(4)])
    conn = app.connector()
    _serve(app, queue, lambda: jobs.counts(conn, queue)["dead"] >= 1, on_event=seen)
    assert runs == {0: 1, 1: 1, 2: 2, 3: 1}  # the failed one alone ran again
    dead = app.job(ids[2])
    assert dead is not None and dead.state == "dead" and "bad 2" in (dead.error or "")
    # the failed job's runs went the per-job way: retried, then dead, each reported
    assert "retrying" in seen.kinds(ids[2]) and "dead" in seen.kinds(ids[2])
    assert seen.kinds(ids[0]) == []


def test_a_chunk_task_with_callbacks_keeps_the_per_job_way(app, queue):
    done: list[str] = []
    lock = threading.Lock()

    def after(job, value):
        with lock:
            done.append(job.id)

    @app.task(queue=queue, name="cp_cb", chunk=3, chunk_wait=0.1, on_success=after)
    def chunked(items):
        return None

    ids = chunked.enqueue_many([(i,) for i in range(3)])
    _serve(app, queue, lambda: len(done) >= 3)
    assert sorted(done) == sorted(ids)  # each job's on_success ran: the per-job run


def test_a_chunk_ack_whose_reply_is_lost_is_sent_again_and_counted_once(app, queue,
                                                                        monkeypatch):
    from echomq.core import errors
    from echomq.runtime import chunking

    real = chunking.jobs.ack_and_claim
    lost: list[int] = []

    async def lose_first_reply(conn, q, entries, *args, **kwargs):
        got = await real(conn, q, entries, *args, **kwargs)  # applied on the server
        if not lost and q == queue and len(entries) == 5:
            lost.append(len(entries))
            raise errors.WireError("reply lost")
        return got

    monkeypatch.setattr(chunking.jobs, "ack_and_claim", lose_first_reply)
    calls: list[int] = []
    ended: list[dict] = []
    lock = threading.Lock()

    @app.task(queue=queue, name="cp_lost", chunk=5, chunk_wait=1)
    def chunked(items):
        with lock:
            calls.append(len(items))

    @app.task(queue=queue, name="cp_lost_cb")
    def cb(info):
        with lock:
            ended.append(info)

    with app.batch(on_complete=cb.s(), on_success=cb.s()) as b:
        b.add(*(chunked.s(i) for i in range(5)))
    worker = _serve(app, queue, lambda: len(ended) >= 2)
    assert lost == [5] and calls == [5]  # the ack went again; the handler ran once
    assert app.batch_info(b.id) == (5, 0, 5, 0, True)
    stats = worker.consumers[0].stats
    assert stats.completed >= 5 and stats.already_settled == 5 and stats.lost == 0
