"""The task layer's values: ``TaskDefaults`` (``@app.task``'s options, checked once),
``Admission`` (a bound task's admission options) with the ``Plan`` one run makes, and a
recurrence's ``repeat.Definition`` (checked once, upserted as it is)."""

from __future__ import annotations

import datetime as dt
import warnings

import pytest

from echomq import App
from echomq.core.payload import encode
from echomq.tasks.admission import Plan
from echomq.tasks.defaults import TaskDefaults
from echomq.verbs import jobs, repeat


def test_task_defaults_hold_the_declared_options_in_their_units():
    d = TaskDefaults.of("default", queue="mail", timeout=30, keep_result=3600,
                        retry_delay_ms=250, expires=dt.timedelta(seconds=5))
    # waits and retention are seconds (held as ms); schedule quantities are ms
    assert (d.queue, d.timeout_ms, d.keep_result_ms, d.retry_delay_ms) == (
        "mail", 30_000, 3_600_000, 250)
    assert d.expires is not None and d.expires.kwargs() == {"expires_ms": 5_000}
    assert TaskDefaults.of("fallback").queue == "fallback"
    with pytest.raises(TypeError, match=r"unexpected keyword argument.*keep_results"):
        TaskDefaults.of("default", keep_results=3600)


def test_an_implausible_keep_result_warns_and_a_plausible_one_does_not(app):
    with pytest.warns(UserWarning, match="keep_result=86400000 is SECONDS"):
        app.task(name="t.ms_meant", keep_result=86_400_000)(lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hour = app.task(name="t.hour", keep_result=3600)(lambda: None)
    assert hour.keep_result_ms == 3_600_000


def test_app_task_refuses_a_bad_option_before_the_decorator_gets_a_function(app):
    with pytest.raises(ValueError, match="max_attempts"):
        app.task(max_attempts=0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        app.task(queue_name="x")  # type: ignore[call-arg]
    assert app.tasks == {}


def test_a_bound_task_has_its_own_admission_and_the_task_keeps_its_own(app, queue):
    t = app.task(name="t.bound", queue=queue)(lambda x: x)
    assert t.admission.plain and t.admission.flat is jobs.PLAIN
    urgent = t.options(priority=3, unique="k", unique_for=60)
    assert urgent.admission is not t.admission
    assert (urgent.priority, urgent.unique, urgent.unique_for_ms) == (3, "k", 60_000)
    assert urgent.admission.flat is not None and not urgent.admission.plain
    assert (t.priority, t.unique) == (0, None)
    grouped = t.options(group="tenant-1")
    assert grouped.admission.flat is None  # a group takes the general path
    with pytest.raises(ValueError, match="unique_for needs a unique key"):
        t.options(unique_for=5)


def test_a_plan_is_checked_before_any_io_and_submitted_on_either_connector(app, queue):
    t = app.task(name="t.plan", queue=queue)(lambda x: x)
    plan = t._in(1_000, (1,), {})
    assert isinstance(plan, Plan) and plan.queues == (queue,) and plan.durable
    with pytest.raises(TypeError):
        t._now((), {})  # a missing argument: refused while the plan is made
    job_id = app.submit(plan)
    assert app.job(job_id).state == "scheduled"

    async def main() -> str:
        return await app.asubmit(t._now((2,), {}))

    import asyncio
    again = asyncio.run(main())
    assert app.job(again).state == "pending"


def test_a_definition_is_one_checked_value_and_definition_is_keyword_only():
    spec = repeat.Definition.of(template=b"x", cron="0  3 * * *", tz="Europe/Paris",
                                start_at=dt.datetime(2030, 1, 1), exclude=["2030-01-02"])
    assert spec.cron == "0 3 * * *"  # stored with its whitespace collapsed
    assert spec.start_at == 1_893_452_400_000  # a naive datetime read in the zone
    assert spec.exclude == ("2030-01-02",)
    assert repeat.definition(template=b"x", cron="0  3 * * *", tz="Europe/Paris",
                             start_at=dt.datetime(2030, 1, 1),
                             exclude=["2030-01-02"]) == spec.fields()
    with pytest.raises(TypeError):
        repeat.definition(b"x", 1000, None, "UTC", None, None, None, None, None, None,
                          "allow")  # type: ignore[misc]
    with pytest.raises(ValueError, match="exactly one cadence"):
        repeat.Definition.of(template=b"x")
    with pytest.raises(ValueError, match="jitter_ms"):
        repeat.Definition.of(template=b"x", every_ms=100, jitter_ms=200)


def test_every_and_cron_check_once_and_the_worker_upserts_the_value_as_it_is(app, conn,
                                                                             queue):
    @app.cron("0 3 * * *", tz="UTC", overlap="skip", jitter_ms=500)
    @app.task(queue=queue, name="t.nightly")
    def nightly() -> None: ...

    with pytest.raises(ValueError, match="overlap"):
        app.every(1_000, overlap="sometimes")
    with pytest.raises(ValueError, match=r"@app.cron\('61 \* \* \* \*'"):
        app.cron("61 * * * *")
    (rec,) = app.recurrences
    assert rec.spec.template == encode("t.nightly")
    assert (rec.spec.overlap, rec.spec.jitter_ms) == ("skip", 500)
    assert repeat.put(conn, rec.queue, rec.name, rec.spec) == "registered"
    assert repeat.put(conn, rec.queue, rec.name, rec.spec) == "exists"
    # the keyword form of the same definition is the same record
    assert repeat.upsert(conn, rec.queue, rec.name, template=encode("t.nightly"),
                         cron="0 3 * * *", overlap="skip", jitter_ms=500) == "exists"


def test_stacking_a_task_above_a_recurrence_keeps_its_definition(app, queue):
    @app.task(queue=queue, name="t.moved")
    @app.every(60_000, jitter_ms=1_000, limit=3)
    def moved() -> None: ...

    (rec,) = app.recurrences
    assert (rec.task, rec.queue, rec.every_ms) == ("t.moved", queue, 60_000)
    assert (rec.spec.jitter_ms, rec.spec.limit) == (1_000, 3)
    assert rec.template == encode("t.moved")


def test_the_app_is_the_producer_its_tasks_and_flows_submit_to():
    from echomq.tasks.producer import Producer

    app: Producer = App("valkey://127.0.0.1:1")  # never connected here
    assert app.partitions_of("anything") == 1
