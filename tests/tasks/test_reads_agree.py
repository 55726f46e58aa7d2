"""Reads that agree (issue 32): ``app.job``/``app.result`` find a job on any queue the
server knows (a job sent with ``options(queue=...)`` included); ``queue=`` narrows."""

from __future__ import annotations

import asyncio

import pytest

from echomq import App, errors
from echomq.tasks.worker import run_worker
from tests.support.cli import echomq


def test_job_and_result_find_a_job_sent_to_another_queue(url, queue):
    with App(url) as app:
        @app.task(queue=queue, name=f"{queue}.add", keep_result=60)
        def add(x: int, y: int) -> int:
            return x + y

        other = f"{queue}-rerouted"
        jid = add.options(queue=other).enqueue(2, 3)
        info = app.job(jid)
        assert info is not None and info.queue == other and info.state == "pending"
        assert asyncio.run(app.ajob(jid)) is not None
        assert app.job(jid, queue=queue) is None  # queue= narrows the read
        assert run_worker(app, [other], burst=True, beat_ms=50) == 0
        assert app.result(jid, timeout=5) == 5
        assert asyncio.run(app.aresult(jid, timeout=5)) == 5


def test_an_unknown_id_reads_none_and_result_raises(url, queue):
    with App(url) as app:
        @app.task(queue=queue, name=f"{queue}.noop")
        def noop() -> None: ...

        from echomq.core import ids
        missing = ids.mint()
        assert app.job(missing) is None
        with pytest.raises(errors.JobNotFound):
            app.result(missing, timeout=1)


def test_a_burst_worker_stops_beside_a_paused_queue_with_pending_jobs(url, queue, tmp_path):
    (tmp_path / "shop.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.task(queue={queue!r})\ndef pay() -> None: ...\n")
    with App(url) as app:
        app.registry.tasks.clear()  # declared by the worker's module, enqueued by name
        from echomq.core import ids
        from echomq.core.payload import encode
        from echomq.verbs import jobs, registry
        conn = app.connector()
        jobs.enqueue(conn, queue, ids.mint(), encode("shop.pay", []))
        registry.add(conn, [queue])
        jobs.pause(conn, queue)
        done = echomq("worker", "shop:app", "--burst", "--beat-ms", "50", url=url,
                      cwd=tmp_path, timeout=30)
        assert done.returncode == 0, done.stderr
        assert "burst: nothing left to run" in done.stderr
        assert jobs.counts(conn, queue)["pending"] == 1  # still there for after the resume
