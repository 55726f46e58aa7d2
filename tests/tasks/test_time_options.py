"""The friendly layer's time options (DESIGN §3c): ``task.options(expires=, debounce=,
debounce_ms=, debounce_max_ms=)`` and ``@app.task(expires=)``: checked before any I/O,
written as the verbs say, sync and async."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from echomq.core import keyspace
from tests.support.clients import server_ms


def test_expires_is_written_as_a_server_deadline(app, raw, queue):
    @app.task(queue=queue, expires=dt.timedelta(seconds=30))
    def work(x): ...

    before = server_ms(raw)
    jid = work.enqueue(1)
    deadline = int(raw.hget(keyspace.job_key(queue, jid), "expires"))
    assert before + 30_000 <= deadline <= server_ms(raw) + 30_000
    # options override the declaration; a datetime is an absolute deadline
    at = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)
    jid = work.options(expires=at).enqueue(2)
    assert int(raw.hget(keyspace.job_key(queue, jid), "expires")) == int(at.timestamp() * 1000)
    jid = work.options(expires=5_000).enqueue_in(1_000, 3)
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"scheduled"
    # enqueue_many admits each run with its deadline
    many = work.enqueue_many([(4,), (5,)])
    assert all(raw.hexists(keyspace.job_key(queue, j), "expires") for j in many)
    info = app.job(many[0])
    assert info is not None and info.expires_ms is not None


def test_bad_time_options_are_refused_before_any_io(app, snap, queue):
    @app.task(queue=queue)
    def work(x): ...

    before = snap(queue)
    with pytest.raises(TypeError):
        work.options(expires=1.5)
    with pytest.raises(ValueError):
        work.options(expires=0)
    with pytest.raises(TypeError):
        app.task(queue=queue, name="other", expires="soon")
    with pytest.raises(ValueError):
        work.options(debounce="k")  # no debounce_ms
    with pytest.raises(ValueError):
        work.options(debounce_ms=100)  # no key
    with pytest.raises(ValueError):
        work.options(debounce="k", debounce_ms=100, debounce_max_ms=50)
    with pytest.raises(ValueError):
        work.options(unique="u", debounce="k", debounce_ms=100)
    with pytest.raises(TypeError):
        work.options(debounce="k", debounce_ms=100).enqueue_in(10, 1)
    assert snap(queue) == before


def test_debounced_enqueue_returns_the_one_id_sync_and_async(app, raw, queue):
    @app.task(queue=queue)
    def work(x): ...

    bump = work.options(debounce="k", debounce_ms=dt.timedelta(seconds=60))
    first = bump.enqueue(1)
    assert bump.enqueue(2) == first

    async def more() -> list[str]:
        out = [await bump.aenqueue(3)]
        await app.aclose()
        return out

    assert asyncio.run(more()) == [first]
    assert raw.hget(keyspace.job_key(queue, first), "payload").endswith(b'"task":"' +
                                                                     work.name.encode() + b'"}')
    assert b"[3]" in raw.hget(keyspace.job_key(queue, first), "payload")


def test_a_partitioned_debounce_key_meets_on_one_partition(app, raw, queue):
    @app.task(queue=queue, partitions=4)
    def work(x): ...

    bump = work.options(debounce="k", debounce_ms=60_000)
    assert len({bump.enqueue(i) for i in range(8)}) == 1


def test_with_no_worker_the_status_and_the_result_learn_the_deadline(app, queue):
    import time

    from echomq import errors

    @app.task(queue=queue)
    def work(x): ...

    paused = work.options(expires=50).enqueue(1)
    waiting = work.options(expires=50).enqueue(2)
    time.sleep(0.1)  # no worker: nothing popped them
    info = app.job(paused)
    assert info.state == "expired" and info.waiting_on is None
    with pytest.raises(errors.JobExpired):
        app.result(waiting, timeout=5)
    fresh = work.options(expires=60_000).enqueue(3)
    assert app.job(fresh).state == "pending" and app.job(fresh).waiting_on
