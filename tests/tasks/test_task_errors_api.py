"""The task API of errors and retries, without a worker: arguments checked at enqueue (a bad
call writes nothing), ``task.options(queue=, job_id=)``, the declaration checks of
``retry_on``/``dont_retry_on``/``rate``/callbacks/list backoff, decorators stacked in either
order, and ``App("")``."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from echomq import App
from echomq.core import keyspace
from echomq.core.payload import encode
from echomq.tasks.declare import Recurrence
from echomq.verbs import jobs
from echomq.verbs.repeat import Definition


def test_a_bad_argument_count_writes_nothing(app, queue, raw, snap):
    @app.task(queue=queue)
    def send_email(to: str, subject: str, *, cc: str | None = None) -> None: ...

    before = snap(queue)
    with pytest.raises(TypeError, match="missing a required argument: 'subject'") as exc:
        send_email.enqueue("only-one-arg")  # type: ignore[call-arg]
    assert "send_email(to, subject, *, cc=None)" in str(exc.value)  # how to call it
    assert "nothing was queued" in str(exc.value)
    bad_calls = [
        lambda: send_email.enqueue("a", "b", "c"),
        lambda: send_email.enqueue("a", "b", bcc="x"),
        lambda: send_email.enqueue_in(1_000, "a"),
        lambda: send_email.enqueue_at(dt.datetime.now(dt.UTC), "a"),
        lambda: send_email.enqueue_many([("a", "b"), ("only",)]),  # all checked first
        lambda: send_email.options(priority=3).enqueue("a"),
        lambda: send_email.options(unique="k").enqueue("a"),
        lambda: app.enqueue(send_email.name, "a"),
        lambda: asyncio.run(send_email.aenqueue("a")),
        lambda: asyncio.run(send_email.aenqueue_in(5, "a", "b", "c")),
    ]
    for call in bad_calls:
        with pytest.raises(TypeError):
            call()
    assert snap(queue) == before  # not a row, not an index entry, not a registry note
    assert not raw.sismember(keyspace.registry_key(), queue)
    # the good calls go through, keyword arguments included
    assert send_email.enqueue("a", "b", cc="c").startswith("JOB")
    assert send_email.enqueue(to="a", subject="b").startswith("JOB")
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 2


def test_check_args_false_admits_what_the_signature_would_refuse(app, queue, raw):
    @app.task(queue=queue, check_args=False)
    def loose(a: int) -> None: ...

    @app.task(queue=queue)
    def variadic(*args: int, **kwargs: int) -> None: ...

    assert loose.enqueue(1, 2, 3).startswith("JOB")  # type: ignore[call-arg]
    assert variadic.enqueue(1, 2, x=3).startswith("JOB")
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 2
    with pytest.raises(TypeError, match="check_args is True or False"):
        app.task(queue=queue, check_args="no")  # type: ignore[arg-type]


def test_options_queue_sends_one_call_elsewhere(app, queue, raw):
    @app.task(queue=queue)
    def work(n: int) -> None: ...

    other = queue + "-other"
    jid = work.options(queue=other).enqueue(1)
    assert raw.zscore(keyspace.queue_key(other, "pending"), jid) is not None
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 0
    assert work.queue == queue  # the task itself is unchanged
    later = work.options(queue=other, priority=2).enqueue_in(60_000, 2)
    assert raw.zscore(keyspace.queue_key(other, "schedule"), later) is not None
    assert app.job(later, queue=other).priority == 2
    with pytest.raises(ValueError):
        work.options(queue="bad{name}")


def test_options_job_id_is_an_idempotency_key(app, queue, raw):
    @app.task(queue=queue)
    def charge(invoice: str) -> None: ...

    key = "JOB-invoice-42"
    assert charge.options(job_id=key).enqueue("inv-42") == key
    # a second enqueue with the same id is a duplicate: the same id, nothing written
    assert charge.options(job_id=key).enqueue("inv-42-again") == key
    assert charge.options(job_id=key, priority=5).enqueue_in(1_000, "x") == key
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 1
    assert raw.zcard(keyspace.queue_key(queue, "schedule")) == 0
    assert app.job(key).args == ["inv-42"]
    assert asyncio.run(charge.options(job_id=key).aenqueue("async")) == key
    for bad, error in (("invoice-42", ValueError), (42, TypeError), ("JOB" + "x" * 1_000,
                                                                     ValueError)):
        with pytest.raises(error):
            charge.options(job_id=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="names one job"):
        charge.options(job_id="JOB-many").enqueue_many([("a",), ("b",)])


def test_a_job_id_on_a_partitioned_queue_finds_its_partition_again(app, queue, raw):
    @app.task(queue=queue, partitions=4)
    def part(n: int) -> None: ...

    key = "JOB-partitioned-1"
    assert part.options(job_id=key).enqueue(1) == key
    assert part.options(job_id=key).enqueue(2) == key
    rows = [q for q in part.queues if raw.exists(keyspace.job_key(q, key))]
    assert len(rows) == 1


def test_declaration_checks(app, queue):
    with pytest.raises(TypeError, match="exception classes"):
        app.task(queue=queue, retry_on=("OSError",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exception classes"):
        app.task(queue=queue, dont_retry_on=[int])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a rate"):
        app.task(queue=queue, rate="fast")
    with pytest.raises(TypeError, match="must be a function"):
        app.task(queue=queue, on_failure="log")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one delay"):
        app.task(queue=queue, backoff=[])

    @app.task(queue=queue, rate="10/s", backoff=[dt.timedelta(seconds=1), 5_000],
              retry_on=OSError)
    def a() -> None: ...

    assert a.rate == (10, 1_000) and a.backoff == [1_000, 5_000]
    assert a.retry_on == (OSError,)

    @app.task(queue=queue, rate=(10, 1_000))  # the same rate: fine
    def b() -> None: ...

    with pytest.raises(ValueError, match="already has rate 10/1s"):
        @app.task(queue=queue, rate="5/s")
        def c() -> None: ...


def test_task_above_or_below_a_recurrence_registers_it_on_the_task_queue(app, queue):
    """``@app.task(queue=...)`` above ``@app.cron``/``@app.every`` used to leave the
    recurrence on queue ``default`` (the function registered there first), where a worker
    serving the task's queue never ran it."""
    @app.task(queue=queue, name="late")
    @app.cron("0 3 * * *", name="nightly", args=[1])
    def late_above(n: int) -> None: ...

    @app.cron("0 3 * * *", name="nightly2", args=[1])
    @app.task(queue=queue, name="late2")
    def late_below(n: int) -> None: ...

    @app.task(queue=queue)
    @app.every(dt.timedelta(minutes=5))
    def ticking() -> None: ...

    assert app.recurrences == [
        Recurrence("late", queue, "nightly",
                   Definition.of(template=encode("late", [1]), cron="0 3 * * *")),
        Recurrence("late2", queue, "nightly2",
                   Definition.of(template=encode("late2", [1]), cron="0 3 * * *")),
        Recurrence(ticking.name, queue, ticking.name,
                   Definition.of(template=encode(ticking.name), every_ms=300_000)),
    ]
    # the defaults-registered function left no task behind on queue default
    assert sorted(app.tasks) == sorted(["late", "late2", ticking.name])
    assert app.queues() == [queue]


def test_an_empty_url_is_no_url(monkeypatch, url, tmp_path):
    """``App("")`` reads as ``App()``: ``$ECHOMQ_URL``, else the embedded server (here the
    environment names the test server)."""
    monkeypatch.setenv("ECHOMQ_URL", url)
    for empty in ("", "  "):
        a = App(empty, data_dir=tmp_path)
        assert a.url == url
        a.close()
    monkeypatch.setenv("ECHOMQ_URL", "")
    a = App(url)
    a.url = ""  # what `echomq worker` hands on for an empty --url
    monkeypatch.setenv("ECHOMQ_URL", url)
    assert a.url == url
    a.close()


def test_jobinfo_keeps_attempts_and_says_runs(app, queue, conn):
    @app.task(queue=queue)
    def t() -> None: ...

    jid = t.enqueue()
    claim = jobs.claim(conn, queue, 30_000)
    assert claim is not None
    info = app.job(jid)
    assert info is not None and (info.attempts, info.runs) == (1, 1)
    assert info.tally.text() == "1 run (0 failures)"
