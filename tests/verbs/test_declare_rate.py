"""``jobs.declare_rate``: the rate an app's tasks declare, applied when a worker starts, and
how it combines with an operator's ``set_rate`` / ``echomq rate`` (the operator's wins until
``clear_rate``), on both connectors and both wires; and a worker start doing it."""

from __future__ import annotations

import logging

import pytest

from echomq.core import keyspace
from echomq.verbs import jobs
from tests.support.workers import serving


def rate_of(raw, queue):
    return raw.hgetall(keyspace.queue_key(queue, "rate"))


def test_a_declared_rate_is_applied_then_kept_then_removed(run, raw, queue):
    assert run(jobs.declare_rate, queue, (10, 1_000)) == ("applied", "10/1000")
    # the wire's hash stays exactly what `echomq rate` writes
    assert rate_of(raw, queue) == {b"max": b"10", b"ms": b"1000"}
    assert run(jobs.declare_rate, queue, (10, 1_000)) == ("same", "10/1000")
    assert run(jobs.declare_rate, queue, (20, 1_000)) == ("applied", "20/1000")
    assert run(jobs.declare_rate, queue, None) == ("cleared", "")
    assert not raw.exists(keyspace.queue_key(queue, "rate"))
    assert not raw.exists(keyspace.queue_key(queue, "rate:declared"))
    assert run(jobs.declare_rate, queue, None) == ("none", "")


def test_an_operator_rate_wins_until_it_is_removed(run, raw, queue):
    run(jobs.declare_rate, queue, (10, 1_000))
    run(jobs.set_rate, queue, 2, 1_000)  # `echomq rate Q 2/s` during an incident
    assert run(jobs.declare_rate, queue, (10, 1_000)) == ("kept", "2/1000")
    assert run(jobs.declare_rate, queue, None) == ("kept", "2/1000")  # never an operator's
    assert rate_of(raw, queue) == {b"max": b"2", b"ms": b"1000"}
    run(jobs.clear_rate, queue)  # `echomq rate Q none`: the declared rate comes back
    assert run(jobs.declare_rate, queue, (10, 1_000)) == ("applied", "10/1000")


def test_an_operator_rate_set_before_any_worker_is_kept(run, queue):
    run(jobs.set_rate, queue, 5, 60_000)
    assert run(jobs.declare_rate, queue, (10, 1_000)) == ("kept", "5/60000")


def test_a_bad_declared_rate_writes_nothing(run, raw, queue):
    for bad in ((0, 1_000), (1, 0)):
        with pytest.raises(ValueError):
            run(jobs.declare_rate, queue, bad)
    assert not raw.exists(keyspace.queue_key(queue, "rate"))


def test_a_worker_start_applies_its_tasks_rate_and_says_when_it_keeps_one(app, raw, queue,
                                                                           caplog):
    @app.task(queue=queue, rate="3/s")
    def limited() -> None: ...

    other = queue + "-op"

    @app.task(queue=other, rate="7/s")
    def overridden() -> None: ...

    jobs.set_rate(app.connector(), other, 1, 1_000)
    with caplog.at_level(logging.INFO, logger="echomq.worker"), serving(app, [queue, other]):
        pass
    assert rate_of(raw, queue) == {b"max": b"3", b"ms": b"1000"}
    assert rate_of(raw, other) == {b"max": b"1", b"ms": b"1000"}
    said = caplog.text
    assert f"queue {queue}: rate 3/1s (declared by task" in said
    assert f"queue {other}: keeping the rate 1/1s set with `echomq rate`" in said
    assert f"`echomq rate {other} none`" in said
