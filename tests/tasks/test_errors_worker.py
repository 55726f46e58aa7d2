"""Errors and retries decided by a real worker process (``echomq worker app_mod:app``):
``retry_on``/``dont_retry_on`` with subclasses, ``Fail``, ``Retry``, a list backoff's delays
measured on the SERVER clock, the task callbacks (and their errors, which change nothing),
the counts every surface reports in one vocabulary, and the rate a task declares."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import valkey

from echomq import App
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import jobs
from tests.support.cli import echomq
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow  # a worker process for the module

APP = '''
import json, os, time
import valkey
from echomq import App, Delay, Fail, Retry, current_job

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]
r = valkey.Valkey.from_url(os.environ["ECHOMQ_URL"])


class Transient(OSError):  # a subclass of a retry_on class
    pass


class BadInput(ValueError):  # a subclass of a dont_retry_on class
    pass


def ran(tag=None):
    """Note this run's start on the SERVER clock: key runs:<job id>."""
    secs, micros = r.time()
    r.rpush(Q + ":runs:" + current_job().id, secs * 1000 + micros // 1000)


def errors_of(kind):
    return {"transient": Transient("network down"), "reset": ConnectionResetError("reset"),
            "value": ValueError("bad value"), "bad": BadInput("bad input"),
            "key": KeyError("k")}[kind]


@app.task(queue=Q, name="picky", retry_on=(OSError,), dont_retry_on=(ConnectionResetError,),
          max_attempts=3, backoff=("fixed", 50))
def picky(kind):
    ran()
    raise errors_of(kind)


@app.task(queue=Q, name="strict", dont_retry_on=ValueError, max_attempts=3,
          retry_delay_ms=50)
def strict(kind):
    ran()
    raise errors_of(kind)


@app.task(queue=Q, name="final", max_attempts=5, retry_delay_ms=50)
def final(user):
    ran()
    raise Fail(f"no such user: {user}")


@app.task(queue=Q, name="again", max_attempts=5, backoff=("fixed", 60_000))
def again(times, delay_ms):
    ran()
    if current_job().attempts <= times:
        raise Retry(delay_ms, error=OSError("upstream busy"))
    return "done"


@app.task(queue=Q, name="listed", max_attempts=5, backoff=[200, 400, 800])
def listed():
    ran()
    raise RuntimeError("always")


def record(settled, *rest):
    r.rpush(Q + ":cb:" + settled.id, json.dumps({
        "outcome": settled.outcome, "task": settled.task, "args": settled.args,
        "result": settled.result, "error": settled.error_text, "reason": settled.reason,
        "delay_ms": settled.delay_ms, "runs": settled.runs, "failures": settled.failures,
        "delays": settled.delays, "type": type(settled.error).__name__}))


async def arecord(settled, value):  # an async callback taking (settled, value)
    record(settled)
    r.rpush(Q + ":cbvalue:" + settled.id, repr(value))


def broken(settled):
    r.rpush(Q + ":cb:" + settled.id, json.dumps({"outcome": "broken-" + settled.outcome}))
    raise RuntimeError("the callback itself fails")


@app.task(queue=Q, name="noted", max_attempts=2, retry_delay_ms=50,
          on_success=record, on_failure=record, on_retry=record)
def noted(fail_times):
    if current_job().attempts <= fail_times:
        raise OSError(f"fails on run {current_job().attempts}")
    return {"ok": current_job().attempts}


@app.task(queue=Q, name="anoted", max_attempts=2, retry_delay_ms=50,
          on_success=arecord, on_failure=arecord, on_retry=arecord)
async def anoted(fail_times):
    if current_job().attempts <= fail_times:
        raise KeyError("async miss")
    return 7


@app.task(queue=Q, name="grumpy", max_attempts=2, retry_delay_ms=50,
          on_success=broken, on_failure=broken, on_retry=broken, keep_result=60)
def grumpy(fail):
    if fail:
        raise OSError("no")
    return "fine"


@app.task(queue=Q, name="wobbly", max_attempts=2, retry_delay_ms=50)
def wobbly():
    if current_job().attempts <= 2:
        raise Delay(50)
    raise RuntimeError("boom")


@app.task(queue=Q + "-rated", name="rated", rate="4/s")
def rated(n):
    ran()


def on_event(ev):
    if ev.kind in ("retrying", "dead"):
        r.rpush(Q + ":events:" + ev.job_id, json.dumps([ev.kind, ev.attempts, ev.info]))
'''


class Served:
    """The module's worker process and what the tests read."""

    def __init__(self, url: str, queue: str, proc: subprocess.Popen[str]) -> None:
        self.url, self.queue, self.proc = url, queue, proc
        self.raw = valkey.Valkey.from_url(url)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def put(self, task: str, *args: Any, queue: str | None = None) -> str:
        jid = ids.mint()
        conn = App(self.url).connector()
        jobs.enqueue(conn, queue or self.queue, jid, encode(task, args))
        return jid

    def row(self, jid: str, queue: str | None = None) -> dict[str, str]:
        got = self.raw.hgetall(keyspace.job_key(queue or self.queue, jid))
        return {k.decode(): v.decode(errors="replace") for k, v in got.items()
                if k != b"payload"}

    def dead(self, jid: str) -> dict[str, str]:
        wait_for(lambda: self.row(jid).get("state") == "dead", 20, f"{jid} dead",
                 detail=lambda: f"{self.row(jid)}\n" + "\n".join(self.lines[-20:]))
        return self.row(jid)

    def runs_ms(self, jid: str) -> list[int]:
        return [int(v) for v in self.raw.lrange(f"{self.queue}:runs:{jid}", 0, -1)]

    def list_of(self, what: str, jid: str) -> list[Any]:
        return [json.loads(v) for v in self.raw.lrange(f"{self.queue}:{what}:{jid}", 0, -1)]

    def log(self, jid: str, words: str = "dead after") -> list[str]:
        """The worker's log lines about ``jid`` that hold ``words``."""
        return [line for line in self.lines if f"job {jid} " in line and words in line]


@pytest.fixture(scope="module")
def served(tmp_path_factory, url) -> Iterator[Served]:
    where = tmp_path_factory.mktemp("errors-app")
    (where / "app_mod.py").write_text(APP)
    queue = "te" + uuid.uuid4().hex[:10]
    env = {**os.environ, "ECHOMQ_URL": url, "T_QUEUE": queue, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "worker", "app_mod:app", "--beat-ms", "50",
         "--events", "app_mod:on_event"],
        cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    s = Served(url, queue, proc)
    wait_for(lambda: any(" serving " in line for line in s.lines) or proc.poll() is not None,
             20, "worker start", detail=lambda: "\n".join(s.lines))
    assert proc.poll() is None, "\n".join(s.lines)
    yield s
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
        s.raw.close()


def test_retry_on_retries_subclasses_and_dont_retry_on_wins(served):
    transient = served.put("picky", "transient")  # OSError subclass: retried
    reset = served.put("picky", "reset")  # an OSError too, but in dont_retry_on
    value = served.put("picky", "value")  # not in retry_on
    bad = served.put("strict", "bad")  # a subclass of dont_retry_on's ValueError
    key = served.put("strict", "key")  # anything else retries by default

    row = served.dead(transient)
    assert (row["attempts"], row["failures"], row["error"]) == ("3", "3",
                                                                 "Transient: network down")
    for jid, error, reason in ((reset, "ConnectionResetError: reset", "dont_retry_on"),
                               (value, "ValueError: bad value", "retry_on"),
                               (bad, "BadInput: bad input", "dont_retry_on")):
        row = served.dead(jid)
        assert (row["attempts"], row["failures"], row["error"]) == ("1", "1", error), jid
        assert len(served.runs_ms(jid)) == 1
        ((kind, attempts, info),) = served.list_of("events", jid)
        assert (kind, attempts, info["reason"], info["error"]) == ("dead", 1, reason, error)
        wait_for(lambda jid=jid: served.log(jid), 5, "the log line")
        (line,) = served.log(jid)
        words = "not in retry_on" if reason == "retry_on" else reason
        assert f"dead after 1 run (1 failure), not retried ({words}): {error}" in line
    assert served.dead(key)["attempts"] == "3"
    kinds = [e[0] for e in served.list_of("events", transient)]
    assert kinds == ["retrying", "retrying", "dead"]
    assert served.list_of("events", transient)[-1][2]["reason"] == "exhausted"


def test_fail_ends_the_job_dead_at_once_with_its_error(served):
    jid = served.put("final", "ada")
    row = served.dead(jid)
    assert (row["attempts"], row["failures"]) == ("1", "1")  # 4 attempts were left
    assert row["error"] == "Fail: no such user: ada"
    ((kind, _, info),) = served.list_of("events", jid)
    assert (kind, info["reason"]) == ("dead", "fail")
    wait_for(lambda: served.log(jid), 5, "the log line")
    assert "dead after 1 run (1 failure), not retried (Fail): Fail: no such user: ada" in (
        served.log(jid)[0])


def test_retry_spends_an_attempt_after_its_own_delay_on_the_server_clock(served):
    """``Retry(400, error=...)`` instead of the task's 60 s backoff: the next run starts
    at least 400 ms after the failed one on the server clock (and well before 60 s), the
    failure is counted, the error kept is the one given."""
    jid = served.put("again", 1, 400)
    wait_for(lambda: len(served.runs_ms(jid)) == 2, 10, "the second run")
    first, second = served.runs_ms(jid)
    assert 400 <= second - first < 1_400
    wait_for(lambda: served.list_of("events", jid), 5, "the retry event")
    ((kind, attempts, info),) = served.list_of("events", jid)
    assert (kind, attempts, info["reason"], info["delay_ms"], info["error"]) == (
        "retrying", 1, "retry", 400, "OSError: upstream busy")
    assert (info["runs"], info["failures"], info["delays"]) == (1, 1, 0)
    # it spends the budget: raised on every run, the job is dead after max_attempts
    spent = served.put("again", 99, 50)
    row = served.dead(spent)
    assert (row["attempts"], row["failures"], row["error"]) == ("5", "5",
                                                                 "OSError: upstream busy")


def test_a_list_backoff_waits_each_delay_in_turn_then_repeats_the_last(served):
    """backoff=[200, 400, 800], 5 attempts: the gaps between the run starts (SERVER clock)
    are at least 200, 400, 800, 800 ms, each well under the next step."""
    jid = served.put("listed")
    served.dead(jid)
    starts = served.runs_ms(jid)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) == 4, starts
    for gap, want in zip(gaps, [200, 400, 800, 800], strict=True):
        assert want <= gap < want + 350, gaps
    delays = [e[2]["delay_ms"] for e in served.list_of("events", jid) if e[0] == "retrying"]
    assert delays == [200, 400, 800, 800]


def test_callbacks_run_after_the_outcome_with_its_facts(served):
    ok_after_one = served.put("noted", 1)
    always = served.put("noted", 9)
    wait_for(lambda: len(served.list_of("cb", ok_after_one)) == 2, 10, "two callbacks")
    retry, success = served.list_of("cb", ok_after_one)
    assert (retry["outcome"], retry["reason"], retry["delay_ms"], retry["type"]) == (
        "retrying", "backoff", 50, "OSError")
    assert (retry["runs"], retry["failures"], retry["error"]) == (1, 1,
                                                                  "OSError: fails on run 1")
    assert (success["outcome"], success["result"], success["args"]) == (
        "completed", {"ok": 2}, [1])
    assert (success["runs"], success["failures"], success["task"]) == (2, 1, "noted")
    served.dead(always)
    wait_for(lambda: len(served.list_of("cb", always)) == 2, 5, "two callbacks")
    retry, death = served.list_of("cb", always)
    assert (retry["outcome"], death["outcome"], death["reason"]) == (
        "retrying", "dead", "exhausted")
    assert (death["runs"], death["failures"], death["error"]) == (2, 2,
                                                                  "OSError: fails on run 2")


def test_async_callbacks_get_the_value_as_a_second_argument(served):
    jid = served.put("anoted", 1)
    wait_for(lambda: served.raw.llen(f"{served.queue}:cbvalue:{jid}") == 2, 10, "callbacks")
    values = [v.decode() for v in served.raw.lrange(f"{served.queue}:cbvalue:{jid}", 0, -1)]
    assert values == ["KeyError('async miss')", "7"]
    assert [c["outcome"] for c in served.list_of("cb", jid)] == ["retrying", "completed"]


def test_a_failing_callback_is_logged_and_changes_nothing(served):
    done = served.put("grumpy", False)
    failed = served.put("grumpy", True)
    wait_for(lambda: served.raw.exists(keyspace.queue_key(served.queue, f"result:{done}")),
             10, "the kept result")
    assert json.loads(served.raw.get(keyspace.queue_key(served.queue, f"result:{done}"))) == (
        "fine")
    row = served.dead(failed)  # retried once (the on_retry error did not stop it), dead
    assert (row["attempts"], row["error"]) == ("2", "OSError: no")
    wait_for(lambda: len(served.list_of("cb", failed)) == 2, 5, "both callbacks ran")
    assert [c["outcome"] for c in served.list_of("cb", failed)] == [
        "broken-retrying", "broken-dead"]
    wait_for(lambda: sum("callback" in line and "failed" in line for line in served.lines)
             >= 3, 5, "three callback errors logged")
    logged = [line for line in served.lines if "callback" in line and "failed" in line]
    assert any(f"job {done}: on_success callback" in line for line in logged)
    assert any(f"job {failed}: on_failure callback" in line and "stays dead" in line
               for line in logged)
    assert any("RuntimeError: the callback itself fails" in line for line in served.lines)
    assert served.proc.poll() is None  # the worker goes on


def test_the_counts_agree_everywhere(served):
    """Two delays then two failures at max_attempts=2: the log, the event, app.job(id),
    `echomq job` and the dashboard's job page all say 4 runs, 2 failures, 2 delays
    (the log used to say "dead after 2 attempts" while app.job(id).attempts read 4)."""
    jid = served.put("wobbly")
    row = served.dead(jid)
    assert (row["attempts"], row["failures"], row["delays"]) == ("4", "2", "2")
    wait_for(lambda: served.log(jid), 5, "the log line")
    assert "dead after 4 runs (2 failures, 2 delays): RuntimeError: boom" in served.log(jid)[-1]
    # the observer gets the event after the settlement logged it: wait for the event itself
    wait_for(lambda: [e[0] for e in served.list_of("events", jid)][-1:] == ["dead"], 5,
             "the dead event")
    kind, attempts, info = served.list_of("events", jid)[-1]
    assert (kind, attempts) == ("dead", 4)
    assert (info["runs"], info["failures"], info["delays"]) == (4, 2, 2)
    app = App(served.url)
    info_ = app.job(jid, queue=served.queue)
    assert info_ is not None
    assert (info_.runs, info_.failures, info_.delays, info_.attempts) == (4, 2, 2, 4)
    assert info_.tally.text() == "4 runs (2 failures, 2 delays)"
    app.close()
    shown = echomq("job", jid, "--queue", served.queue, url=served.url)
    assert shown.returncode == 0, shown.stderr
    assert "runs      4 (2 failures, 2 delays)" in shown.stdout
    listed = echomq("dead", "list", "--queue", served.queue, url=served.url)
    assert any(jid in line and "4 runs (2 failures, 2 delays)" in line
               for line in listed.stdout.splitlines())
    from echomq import Connector
    from echomq.dashboard import serve
    from tests.support.board import Client
    conn = Connector.connect(served.url)
    httpd = serve(conn, "127.0.0.1", 0, [served.queue])
    try:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        status, page = Client(int(httpd.server_address[1])).get(
            f"/q/{served.queue}/job/{jid}")
        assert status == 200
        assert "4 runs (2 failures, 2 delays)" in page
    finally:
        httpd.shutdown()
        conn.close()


def test_a_declared_rate_is_applied_when_the_worker_starts(served):
    rated = served.queue + "-rated"
    assert served.raw.hgetall(keyspace.queue_key(rated, "rate")) == {b"max": b"4",
                                                                     b"ms": b"1000"}
    started = [served.put("rated", n, queue=rated) for n in range(8)]
    wait_for(lambda: all(served.runs_ms(j) for j in started), 10, "all eight ran")
    starts = sorted(served.runs_ms(j)[0] for j in started)
    # at most 4 starts in any 1 s window (SERVER clock): the fifth waits for the first's
    assert starts[4] - starts[0] >= 1_000 - 5, starts
