"""Job control in the runtime against a real Valkey, at wire 4 and 6: cancel of a
running async handler (seen within a third of its lease) and of a sync one polling
``.cancelled``, timeouts (async cancelled, sync abandoned with its slot freed) retried to
dead with a TimeoutError text, kept results waited on from another thread and another
process, unique keys answering the owner's id, ``enqueue_many`` with options, progress,
pause/resume, and events reaching the host program."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from echomq import native
from echomq.core import errors, keyspace
from echomq.runtime.handler import Job, NoCurrentJob, current_job
from echomq.tasks.app import App
from echomq.verbs import jobs
from tests.support.polling import wait_for
from tests.support.workers import Recorder, serving

WIRES = [4, 6] if native.available() else [4]


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


@pytest.fixture(params=WIRES, ids=[f"wire{w}" for w in WIRES])
def app(request, url):
    a = App(url, wire=request.param)
    yield a
    a.close()


def row(raw, queue: str, job_id: str) -> dict[str, str]:
    return {kk.decode(): v.decode(errors="replace")
            for kk, v in raw.hgetall(keyspace.job_key(queue, job_id)).items()}


# -- current_job ---------------------------------------------------------------------------


def test_current_job_outside_a_handler_is_a_clear_error():
    with pytest.raises(LookupError, match="outside a running EchoMQ handler"):
        current_job()
    with pytest.raises(NoCurrentJob):
        current_job()


# -- cancel ----------------------------------------------------------------------------------


def test_cancel_stops_a_running_async_handler_within_a_third_of_its_lease(app, raw, queue):
    lease_ms = 900
    entered = threading.Event()
    stopped: list[tuple[str, float]] = []

    @app.task(queue=queue, name="forever", lease_ms=lease_ms)
    async def forever() -> None:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.append((current_job().id, time.monotonic()))
            raise

    seen = Recorder()
    job_id = forever.enqueue()
    with serving(app, [queue], on_event=seen) as worker:
        assert entered.wait(5)
        asked = time.monotonic()
        assert app.cancel(job_id) == "requested"
        wait_for(lambda: seen.first("cancelled", job_id), 5, "cancelled event")
        consumer = worker.consumers[0]
        assert consumer.stats.cancelled == 1
        assert (consumer.stats.retried, consumer.stats.dead, consumer.stats.completed) == (0, 0, 0)
    assert [jid for jid, _ in stopped] == [job_id]
    # the handler is stopped within a third of the lease of the request (plus a round trip)
    took = stopped[0][1] - asked
    assert took < lease_ms / 3000 + 0.1, f"cancel seen after {took * 1000:.0f} ms"
    state = row(raw, queue, job_id)
    assert state["state"] == "cancelled" and state["attempts"] == "1"
    assert raw.zscore(k(queue, "active"), job_id) is None
    assert raw.zscore(k(queue, "schedule"), job_id) is None
    assert raw.zscore(k(queue, "dead"), job_id) is None
    with pytest.raises(errors.JobCancelled):
        app.result(job_id, timeout=1)
    assert app.cancel(job_id) == "absent"


def test_a_sync_handler_polls_cancelled_and_the_job_ends_cancelled(app, raw, queue):
    polls: list[bool] = []

    @app.task(queue=queue, name="poller", lease_ms=600)
    def poller() -> str:
        job = current_job()
        deadline = time.monotonic() + 10
        while not job.cancelled and time.monotonic() < deadline:
            polls.append(job.cancelled)
            time.sleep(0.01)
        return "stopped"

    seen = Recorder()
    job_id = poller.enqueue()
    with serving(app, [queue], on_event=seen):
        wait_for(lambda: polls, 5, "handler start")
        assert app.cancel(job_id) == "requested"
        wait_for(lambda: seen.first("cancelled", job_id), 5, "cancelled event")
    assert row(raw, queue, job_id)["state"] == "cancelled"
    assert "completed" not in seen.kinds(job_id) and "retrying" not in seen.kinds(job_id)


def test_cancel_of_a_waiting_job_removes_it(app, raw, queue):
    @app.task(queue=queue, name="later")
    def later() -> None:
        raise AssertionError("a cancelled job must not run")

    now_id, in_id = later.enqueue(), later.enqueue_in(dt.timedelta(seconds=60))
    assert app.cancel(now_id) == "cancelled"
    assert app.cancel(in_id) == "cancelled"
    assert raw.zcard(k(queue, "pending")) == 0 and raw.zcard(k(queue, "schedule")) == 0
    assert app.cancel(now_id) == "absent"
    assert app.cancel("JOB" + "0" * 26) == "absent"

    async def acancel() -> tuple[str, str, object]:
        try:
            third = await later.aenqueue_in(60_000)
            info = await app.ajob(third)
            assert info is not None and info.state == "scheduled"
            return await app.acancel(third), await app.acancel(third), await app.ajob(third)
        finally:
            await app.aclose()

    first, second, info = asyncio.run(acancel())
    assert (first, second) == ("cancelled", "absent")
    assert info is not None and info.state == "cancelled"  # type: ignore[attr-defined]
    with serving(app, [queue]) as worker:
        time.sleep(0.3)
        assert worker.consumers[0].stats.claimed == 0


# -- timeouts --------------------------------------------------------------------------------


@pytest.mark.slow
def test_async_timeout_retries_then_dies_with_a_timeout_error_text(app, raw, queue):
    runs: list[int] = []

    @app.task(queue=queue, name="hangs", timeout=0.3, max_attempts=2, retry_delay_ms=50,
              lease_ms=2_000)
    async def hangs() -> None:
        runs.append(current_job().attempts)
        await asyncio.sleep(30)

    seen = Recorder()
    job_id = hangs.enqueue()
    started = time.monotonic()
    with serving(app, [queue], on_event=seen) as worker:
        wait_for(lambda: seen.first("dead", job_id), 10, "dead")
        stats = worker.consumers[0].stats
        assert (stats.timed_out, stats.retried, stats.dead) == (2, 1, 1)
    assert runs == [1, 2]
    assert time.monotonic() - started < 5
    assert seen.kinds(job_id) == ["started", "timed_out", "retrying", "started", "timed_out",
                                  "dead"]
    state = row(raw, queue, job_id)
    assert state["state"] == "dead" and state["failures"] == "2"
    assert state["error"] == "TimeoutError: job exceeded its timeout of 0.3 s"
    with pytest.raises(errors.JobFailed, match="TimeoutError"):
        app.result(job_id, timeout=1)


def test_sync_timeout_abandons_the_thread_and_frees_its_slot(app, raw, queue):
    release = threading.Event()
    done: list[int] = []

    @app.task(queue=queue, name="stuck", timeout=dt.timedelta(milliseconds=300),
              max_attempts=1)
    def stuck() -> None:
        release.wait(20)

    @app.task(queue=queue, name="quick")
    def quick(n: int) -> None:
        done.append(n)

    stuck_id = stuck.enqueue()
    try:
        with serving(app, [queue], concurrency=1) as worker:
            wait_for(lambda: raw.hget(keyspace.job_key(queue, stuck_id), "state") == b"active",
                     5, "stuck started")
            quick.enqueue(1)
            # concurrency 1: the quick job can only run once the stuck one's slot is free
            wait_for(lambda: done == [1], 5, "the freed slot runs the next job")
            assert not release.is_set()  # the stuck thread is still running
            assert worker.consumers[0].stats.abandoned == 1
    finally:
        release.set()
    state = row(raw, queue, stuck_id)
    assert state["state"] == "dead"
    assert state["error"] == "TimeoutError: job exceeded its timeout of 0.3 s"


def test_worker_wide_timeout_applies_to_tasks_without_one(app, raw, queue):
    @app.task(queue=queue, name="sleepy", max_attempts=1)
    async def sleepy() -> None:
        await asyncio.sleep(30)

    @app.task(queue=queue, name="patient", timeout=5, max_attempts=1)
    async def patient() -> str:
        await asyncio.sleep(0.4)
        return "ok"

    a, b = sleepy.enqueue(), patient.enqueue()
    with serving(app, [queue], timeout=0.2) as worker:
        wait_for(lambda: worker.consumers[0].stats.dead == 1
                 and worker.consumers[0].stats.completed == 1, 5, "both settled")
    assert row(raw, queue, a)["error"].startswith("TimeoutError: job exceeded its timeout of 0.2")
    assert not raw.exists(keyspace.job_key(queue, b))  # completed within its own timeout


def test_timeout_and_keep_result_refuse_bad_values(app, queue):
    for bad in (0, -1, dt.timedelta(0)):
        with pytest.raises(ValueError):
            app.task(queue=queue, timeout=bad)
        with pytest.raises(ValueError):
            app.task(queue=queue, keep_result=bad)
    with pytest.raises(TypeError):
        app.task(queue=queue, timeout="5s")  # type: ignore[arg-type]


# -- results ---------------------------------------------------------------------------------


def test_keep_result_round_trip_from_another_thread_and_process(app, url, queue):
    @app.task(queue=queue, name="add", keep_result=60)
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    job_id = add.enqueue(2, 3)
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(app.result(job_id, timeout=10)))
    waiter.start()
    code = ("import sys, json; from echomq.tasks.app import App; a = App(sys.argv[1], wire=int("
            "sys.argv[4])); print(json.dumps(a.result(sys.argv[2], timeout=10, "
            "queue=sys.argv[3]))); a.close()")
    proc = subprocess.Popen([sys.executable, "-c", code, url, job_id, queue, str(app.wire)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # both wait on the job before any worker runs it
    assert waiter.is_alive() and proc.poll() is None
    with serving(app, [queue]):
        waiter.join(10)
        out, err = proc.communicate(timeout=15)
    assert got == [{"sum": 5}]
    assert proc.returncode == 0, err
    assert json.loads(out) == {"sum": 5}
    info = app.job(job_id)
    assert info is not None and info.state == "completed" and info.result == {"sum": 5}
    assert app.result(job_id) == {"sum": 5}  # kept: a second read sees it too


def test_aresult_and_result_timeout(app, queue):
    @app.task(queue=queue, name="echo", keep_result=dt.timedelta(minutes=1))
    async def echo(x: str) -> str:
        return x * 2

    job_id = echo.enqueue("ab")
    with pytest.raises(TimeoutError):
        app.result(job_id, timeout=0.2)  # no worker yet

    async def main() -> object:
        with serving(app, [queue]):
            return await app.aresult(job_id, timeout=10)

    assert asyncio.run(main()) == "abab"
    with pytest.raises(errors.JobNotFound):
        app.result("JOB" + "0" * 26, timeout=0.1)


def test_unserializable_return_value_fails_the_attempt(app, raw, queue):
    @app.task(queue=queue, name="odd", keep_result=60, max_attempts=1)
    def odd() -> object:
        return object()

    job_id = odd.enqueue()
    with serving(app, [queue]) as worker:
        wait_for(lambda: worker.consumers[0].stats.dead == 1, 5, "dead")
    assert "not JSON-serializable" in row(raw, queue, job_id)["error"]


# -- progress ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_progress_sync_and_async_is_stored_and_shown(app, url, raw, queue):
    gate = threading.Event()

    @app.task(queue=queue, name="steps")
    def steps() -> None:
        current_job().progress({"done": 1, "of": 2})
        gate.wait(10)

    @app.task(queue=queue, name="asteps")
    async def asteps() -> None:
        await current_job().aprogress(50)
        with pytest.raises(RuntimeError, match="aprogress"):
            current_job().progress(60)  # would block the loop
        while not gate.is_set():
            await asyncio.sleep(0.01)

    a, b = steps.enqueue(), asteps.enqueue()
    with serving(app, [queue]):
        wait_for(lambda: raw.hget(keyspace.job_key(queue, a), "progress")
                 and raw.hget(keyspace.job_key(queue, b), "progress"), 5, "progress")
        assert app.job(a).progress == {"done": 1, "of": 2}
        assert app.job(b).progress == 50
        shown = subprocess.run([sys.executable, "-m", "echomq.cli", "job", a, "--queue", queue,
                                "--url", url], capture_output=True, text=True, timeout=30)
        gate.set()
    assert shown.returncode == 0, shown.stderr
    assert 'progress  {"done": 1, "of": 2}' in shown.stdout


# -- admission options -----------------------------------------------------------------------


def test_unique_enqueue_returns_the_owner_id_and_writes_nothing(app, raw, queue, snap):
    @app.task(queue=queue, name="invoice")
    def invoice(n: int) -> None:
        return None

    once = invoice.options(unique="invoice-42")
    owner = once.enqueue(1)
    before = snap(queue)
    assert once.enqueue(2) == owner
    assert once.enqueue_in(1000, 3) == owner
    assert invoice.options(unique="invoice-42", priority=3).enqueue(4) == owner

    async def aenqueue() -> str:
        try:
            return await once.aenqueue(7)
        finally:
            await app.aclose()

    assert asyncio.run(aenqueue()) == owner
    assert snap(queue) == before  # nothing written while the key is live
    assert invoice.options(unique="invoice-43").enqueue(5) != owner
    with serving(app, [queue]) as worker:
        wait_for(lambda: worker.consumers[0].stats.completed == 2, 5, "both done")
    again = once.enqueue(6)  # the owner completed: the key was released
    assert again != owner
    assert not raw.exists(k(queue, "unique:invoice-43"))


def test_options_bind_priority_and_group_and_check_before_io(app, raw, queue, snap):
    @app.task(queue=queue, name="work")
    def work(n: int) -> None:
        return None

    low, high = work.options(priority=9), work.options(priority=1)
    ids_ = [low.enqueue(1), high.enqueue(2), work.enqueue(3)]
    assert raw.zscore(k(queue, "pending"), ids_[0]) == 9
    assert raw.zscore(k(queue, "pending"), ids_[1]) == 1
    grouped = work.options(group="tenant-42").enqueue_in(0, 4)
    assert row(raw, queue, grouped)["group"] == "tenant-42"
    assert work.options(priority=2).options(group="g").priority == 2  # options compose
    before = snap(queue)
    for bad in (dict(priority=-1), dict(priority=1_000_001), dict(group="a{b"), dict(unique=""),
                dict(unique_for=5)):
        with pytest.raises(ValueError):
            work.options(**bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        work.options(priority="high")  # type: ignore[arg-type]
    assert snap(queue) == before
    claimed = [c.id for c in jobs.claim_many(app.connector(), queue, 1000, 3)]
    assert claimed == [ids_[2], ids_[1], ids_[0]]  # priority, then mint order


def test_enqueue_many_with_options_is_one_admission_per_call(app, raw, queue):
    @app.task(queue=queue, name="mail")
    def mail(to: str, n: int) -> None:
        return None

    plain = mail.enqueue_many([("a@x", 1), ("b@x", 2)])
    urgent = mail.options(priority=0).enqueue_many([(f"u{i}@x", i) for i in range(700)])
    slow = mail.options(priority=7, group="bulk").enqueue_many([("c@x", 3)])
    assert len(plain) == 2 and len(urgent) == 700 and len(set(urgent)) == 700
    assert raw.zcard(k(queue, "pending")) == 702
    assert row(raw, queue, slow[0])["group"] == "bulk"
    assert row(raw, queue, slow[0])["priority"] == "7"
    assert json.loads(row(raw, queue, urgent[699])["payload"])["args"] == ["u699@x", 699]
    owner = mail.options(unique="digest").enqueue_many([("d@x", 1), ("e@x", 2)])
    assert owner[0] == owner[1]
    with pytest.raises(TypeError, match="call 0 must be a tuple"):
        mail.enqueue_many(["a@x"])  # type: ignore[list-item]

    async def amain() -> list[str]:
        out = await mail.options(priority=3).aenqueue_many([("f@x", 1)])
        await app.aclose()
        return out

    (aid,) = asyncio.run(amain())
    assert raw.zscore(k(queue, "pending"), aid) == 3


# -- pause -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_paused_queue_idles_without_polling_faster_and_resume_wakes_it(app, raw, queue):
    ran: list[float] = []

    @app.task(queue=queue, name="p")
    def p() -> None:
        ran.append(time.monotonic())

    def blpops() -> int:
        return int(raw.info("commandstats").get("cmdstat_blpop", {}).get("calls", 0))

    conn = app.connector()
    jobs.pause(conn, queue)
    p.enqueue()
    with serving(app, [queue], beat_ms=500, metronome=False):
        time.sleep(0.3)
        before = blpops()
        time.sleep(1.5)
        assert ran == []
        # one blocking wait a beat (other tests' servers share the counter: loose bound)
        assert blpops() - before <= 8
        t0 = time.monotonic()
        jobs.resume(conn, queue)
        wait_for(lambda: ran, 3, "run after resume")
    assert ran[0] - t0 < 0.3  # resume's wake token, not the next beat


# -- events ----------------------------------------------------------------------------------


def test_app_on_event_reaches_the_host_program(url, queue):
    seen = Recorder()
    app = App(url, on_event=seen)
    try:
        @app.task(queue=queue, name="ok")
        def ok() -> None:
            return None

        job_id = ok.enqueue()
        with serving(app, [queue]):
            wait_for(lambda: "completed" in seen.kinds(job_id), 5, "completed")
        assert seen.kinds(job_id) == ["started", "completed"]
    finally:
        app.close()


def test_job_dataclass_keeps_its_positional_shape():
    job = Job("q", "JOB" + "0" * 26, 3, b"p")
    assert (job.attempts, job.cancelled) == (3, False)
    with pytest.raises(RuntimeError, match="not held by a running consumer"):
        job.progress(1)


def test_a_grouped_job_delays_itself_at_both_wires(app, raw, queue):
    """At wire 6 EMQ.DELAY refuses a grouped row (a native divergence): the consumer falls
    back to the delay script, which sends it back to its lane when due."""
    runs: list[int] = []

    @app.task(queue=queue, name="later", max_attempts=1)
    def later() -> str:
        runs.append(current_job().attempts)
        if len(runs) == 1:
            current_job().delay(50)
        return "done"

    seen = Recorder()
    job_id = later.options(group="tenant-1").enqueue()
    with serving(app, [queue], on_event=seen):
        wait_for(lambda: "completed" in seen.kinds(job_id), 5, "completed after its delay")
    assert seen.kinds(job_id) == ["started", "delayed", "started", "completed"]
    assert runs == [1, 2]


ISOLATED = '''
import os, time
from echomq import current_job

def beat_forever(path):
    while True:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {current_job().attempts}\\n")
        time.sleep(0.02)

beat_on = beat_forever

def double(x):
    print("printed by the child: not part of its reply")
    if x < 0:
        raise ValueError(f"negative {x}")
    return 2 * x
'''


@pytest.mark.slow
def test_process_isolation_kills_a_plain_function_at_its_timeout_and_on_cancel(
        tmp_path, monkeypatch, url, raw, queue):
    (tmp_path / "iso_tasks.py").write_text(ISOLATED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ECHOMQ_URL", url)
    import iso_tasks

    app = App(url)
    try:
        beat = app.task(queue=queue, name="beat", isolation="process", timeout=6,
                        max_attempts=1)(iso_tasks.beat_forever)
        beat_on = app.task(queue=queue, name="beat_on", isolation="process", lease_ms=600,
                           max_attempts=1)(iso_tasks.beat_on)
        double = app.task(queue=queue, name="double", isolation="process", max_attempts=1,
                          keep_result=60)(iso_tasks.double)
        with pytest.raises(ValueError, match="plain functions"):
            app.task(queue=queue, name="a", isolation="process")(_async_noop)
        with pytest.raises(ValueError, match="importable"):
            app.task(queue=queue, name="l", isolation="process")(lambda: None)
        with pytest.raises(ValueError, match="isolation must be"):
            app.task(queue=queue, name="x", isolation="fiber")(iso_tasks.double)

        ok, bad = double.enqueue(21), double.enqueue(-1)
        with serving(app, [queue], concurrency=4) as worker:
            assert app.result(ok, timeout=30) == 42
            with pytest.raises(errors.JobFailed, match="ValueError: negative -1"):
                app.result(bad, timeout=30)
            # one child start at a time: an interpreter start is slow on a busy machine
            cancelled = beat_on.enqueue(str(tmp_path / "cancelled.log"))
            wait_for(lambda: (tmp_path / "cancelled.log").exists(), 30, "child started")
            timed = beat.enqueue(str(tmp_path / "timed.log"))
            assert app.cancel(cancelled) == "requested"
            wait_for(lambda: worker.consumers[0].stats.dead == 2
                     and worker.consumers[0].stats.cancelled == 1, 30, "timeout and cancel")
        for log_name in ("timed.log", "cancelled.log"):
            size = (tmp_path / log_name).stat().st_size
            time.sleep(0.3)
            assert (tmp_path / log_name).stat().st_size == size, f"{log_name}: child lives on"
            pid = int((tmp_path / log_name).read_text().split()[0])
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert row(raw, queue, timed)["error"] == "TimeoutError: job exceeded its timeout of 6 s"
        assert row(raw, queue, cancelled)["state"] == "cancelled"
    finally:
        app.close()


async def _async_noop() -> None:
    return None


def test_cancel_racing_ack_under_concurrency_ends_each_job_exactly_once(url, raw, queue):
    """300 short jobs on 20 slots while another thread cancels every one of them at random
    moments: each job ends exactly once, completed or cancelled (never both, never retried),
    and the answer of its cancel agrees with that end."""
    import random

    app = App(url, keep_completed=10_000)
    seen = Recorder()
    try:
        @app.task(queue=queue, name="short", lease_ms=300)
        async def short(ms: int) -> None:
            await asyncio.sleep(ms / 1000)

        rng = random.Random(12)
        job_ids = short.enqueue_many([(rng.randint(0, 120),) for _ in range(300)])
        answers: dict[str, str] = {}

        def canceller() -> None:
            order = job_ids[:]
            rng.shuffle(order)
            for jid in order:
                time.sleep(rng.random() * 0.004)
                answers[jid] = app.cancel(jid)

        with serving(app, [queue], concurrency=20, on_event=seen) as worker:
            thread = threading.Thread(target=canceller)
            thread.start()
            thread.join(30)
            wait_for(lambda: sum(1 for k_ in seen.kinds() if k_ in ("completed", "cancelled"))
                     >= sum(1 for a in answers.values() if a != "cancelled"), 20, "all ended")
            stats = worker.consumers[0].stats
            # the handler kind is cached per code object, not per job's fresh closure
            assert len(worker.consumers[0]._runner._is_async) == 1
        ends = {jid: [k_ for k_ in seen.kinds(jid) if k_ in ("completed", "cancelled",
                                                              "retrying", "dead")]
                for jid in job_ids}
        for jid in job_ids:
            state = raw.hget(keyspace.job_key(queue, jid), "state").decode()
            if answers[jid] == "cancelled":  # it was still waiting: it never ran
                assert ends[jid] == [] and state == "cancelled", (jid, ends[jid], state)
            elif answers[jid] == "requested":  # running: its holder or its ack decides
                assert ends[jid] in (["completed"], ["cancelled"]), (jid, ends[jid])
                assert state == ends[jid][0]
            else:  # absent: it had completed already
                assert ends[jid] == ["completed"] and state == "completed", (jid, ends[jid])
        assert stats.retried == 0 and stats.dead == 0
        assert raw.zcard(k(queue, "active")) == 0 and raw.zcard(k(queue, "pending")) == 0
        assert {"cancelled", "requested"} <= set(answers.values())
    finally:
        app.close()
