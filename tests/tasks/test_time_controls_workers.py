"""Time controls under a real worker process (``echomq worker``), on a single server and a
cluster: a job past its deadline in each waiting place ends ``expired`` and never runs
(``app.result`` raises ``JobExpired``); a burst of debounced calls runs once on the last
payload; a steady stream of debounced calls still runs at least every ``debounce_max_ms``.

The handler appends each run to a file (a plain append: it works the same whatever the
server topology), so "never ran" is read from what the worker did, not from the server."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import App
from echomq.core import errors
from echomq.verbs import groups, jobs
from tests.support.cli import kill_all
from tests.support.clients import client_for, server_ms
from tests.support.polling import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.topologies]

APP = '''
import json, os, time
from echomq import App
from echomq.verbs import jobs

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]
LOG = os.environ["T_LOG"]


def note(tag):
    # the SERVER ms it started: the clock run-ats are priced on
    started = jobs.server_now_ms(app.connector())
    with open(LOG, "a") as f:
        f.write(json.dumps([tag, started]) + "\\n")


@app.task(queue=Q, name="work", keep_result=60)
def work(tag, hold=0):
    note(tag)
    time.sleep(hold)
    return tag


@app.task(queue=Q, name="lane", keep_result=60, group="g")
def lane(tag, hold=0):
    note(tag)
    time.sleep(hold)
    return tag
'''


def declare(app: App, queue: str) -> tuple[Any, Any]:
    """The producer's side of the worker's tasks (same names, queue and options)."""

    @app.task(queue=queue, name="work", keep_result=60)
    def work(tag: Any, hold: float = 0) -> Any: ...

    @app.task(queue=queue, name="lane", keep_result=60, group="g")
    def lane(tag: Any, hold: float = 0) -> Any: ...

    return work, lane


class Worker:
    def __init__(self, tmp_path: Any, url: str, queue: str) -> None:
        (tmp_path / "tcapp.py").write_text(APP)
        self.log = tmp_path / "ran.log"
        self.log.touch()
        self.cwd, self.url, self.queue = tmp_path, url, queue
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, beat_ms: int = 100) -> None:
        env = {**os.environ, "ECHOMQ_URL": self.url, "T_QUEUE": self.queue,
               "T_LOG": str(self.log)}
        err = open(self.cwd / "worker.log", "ab")  # noqa: SIM115 - a file, never a full pipe
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "worker", "tcapp:app", "--concurrency", "4",
             "--beat-ms", str(beat_ms), "--log-level", "warning"],
            cwd=self.cwd, env=env, stdout=subprocess.DEVNULL, stderr=err))

    def runs(self) -> list[tuple[Any, int]]:
        """Each run: its tag and the SERVER ms it started."""
        return [tuple(json.loads(line)) for line in self.log.read_text().splitlines()]

    def ran(self) -> list[Any]:
        return [tag for tag, _ in self.runs()]

    def stderr(self) -> str:
        path = self.cwd / "worker.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


@pytest.fixture
def worker(tmp_path: Any, url: str, queue: str) -> Iterator[Worker]:
    w = Worker(tmp_path, url, queue)
    yield w
    kill_all(w.procs)


def state(app: App, job_id: str) -> str | None:
    info = app.job(job_id)
    return None if info is None else info.state


def test_a_job_past_its_deadline_never_runs_wherever_it_waited(app, queue, worker, url):
    work, lane = declare(app, queue)
    conn = app.connector()
    # pending, before any worker runs
    in_pending = work.options(expires=150).enqueue("pending")
    # on the schedule, due after its deadline
    on_schedule = work.options(expires=150).enqueue_in(400, "scheduled")
    # on a lane whose group is at its limit: the blocker holds the one slot
    groups.set_limit(conn, queue, "g", 1)
    blocker = lane.enqueue("blocker", hold=3)
    worker.start()
    wait_for(lambda: "blocker" in worker.ran(), 20, "the blocker runs",
             detail=worker.stderr)
    in_lane = lane.options(expires=200).enqueue("lane")
    # in a paused queue
    jobs.pause(conn, queue)
    paused = work.options(expires=200).enqueue("paused")
    held = [in_pending, on_schedule, in_lane, paused]
    wait_for(lambda: all(state(app, j) == "expired" for j in held), 20,
             "every held job expired", detail=lambda: str([state(app, j) for j in held]))
    jobs.resume(conn, queue)
    marker = work.enqueue("marker")
    assert app.result(marker, timeout=20) == "marker"
    assert app.result(blocker, timeout=20) == "blocker"
    ran = worker.ran()
    assert sorted(ran) == ["blocker", "marker"], ran
    for j in held:
        with pytest.raises(errors.JobExpired):
            app.result(j, timeout=5)
        info = app.job(j)
        assert info.state == "expired" and info.attempts == 0
        assert info.expired_at_ms is not None and info.expires_ms is not None
        assert info.expired_at_ms >= info.expires_ms
    assert jobs.counts(conn, queue)["expired"] == 4
    assert jobs.stats(conn, queue)["expired"] == 4


def test_a_deadline_from_the_declaration_and_a_datetime(app, queue, worker, url):
    import datetime as dt

    @app.task(queue=queue, name="work", keep_result=60, expires=dt.timedelta(milliseconds=100))
    def work(tag: Any, hold: float = 0) -> Any: ...

    late = work.enqueue("declared")
    now = server_ms(client_for(url)) / 1000
    at = work.options(expires=dt.datetime.fromtimestamp(now + 0.1, dt.UTC)).enqueue("dated")
    ok = work.options(expires=60_000).enqueue("in time")
    time.sleep(0.3)
    worker.start()
    assert app.result(ok, timeout=20) == "in time"
    for j in (late, at):
        with pytest.raises(errors.JobExpired):
            app.result(j, timeout=10)
    assert worker.ran() == ["in time"]


def test_a_burst_of_debounced_calls_runs_once_on_the_last_payload(app, queue, worker, url):
    work, _ = declare(app, queue)
    worker.start()
    bump = work.options(debounce="burst", debounce_ms=300)
    got = {bump.enqueue(i) for i in range(100)}
    assert len(got) == 1
    (jid,) = got
    assert app.result(jid, timeout=20) == 99
    time.sleep(0.5)
    assert worker.ran() == [99]
    # the key was released with its job: the next call opens a new window
    again = bump.enqueue("later")
    assert again != jid
    assert app.result(again, timeout=20) == "later"


def test_a_steady_stream_still_runs_every_debounce_max(app, queue, worker, url):
    work, _ = declare(app, queue)
    worker.start(beat_ms=50)
    stream = work.options(debounce="stream", debounce_ms=200, debounce_max_ms=600)
    raw = client_for(url)
    sent: list[tuple[int, str]] = []
    start = server_ms(raw)
    while server_ms(raw) - start < 2_000:  # a call every 50 ms: never quiet for 200 ms
        sent.append((server_ms(raw), stream.enqueue(len(sent))))
        time.sleep(0.05)
    windows = list(dict.fromkeys(j for _, j in sent))
    # each window held calls for at most the cap, then ran, and the next call opened another
    assert 3 <= len(windows) <= 5, windows
    for j in windows:
        assert app.result(j, timeout=20) is not None
    started = dict(worker.runs())
    for j in windows:
        first = min(t for t, x in sent if x == j)
        last_call = max(i for i, (_, x) in enumerate(sent) if x == j)
        # it ran once, on the last payload it got, and no later than its cap allows (its
        # run-at is capped exactly: tests/verbs/test_debounce.py; here + the promote and
        # claim latency of a worker at a 50 ms beat on a loaded 2-core machine)
        assert app.result(j, timeout=5) == last_call
        assert started[last_call] - first <= 600 + 400, (started[last_call] - first)
    assert len(worker.runs()) == len(windows)


OVERLAP_APP = '''
import json, os, time
from echomq import App
from echomq.verbs import jobs

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]
LOG = os.environ["T_LOG"]


@app.every(200, name="tick", overlap=os.environ["T_OVERLAP"])
@app.task(queue=Q, name="slow")
def slow():
    began = jobs.server_now_ms(app.connector())
    time.sleep(0.5)
    with open(LOG, "a") as f:
        f.write(json.dumps([began, jobs.server_now_ms(app.connector())]) + "\\n")
'''


@pytest.mark.parametrize("overlap", ["allow", "skip", "buffer_all", "cancel_other"])
def test_overlap_policies_under_a_worker(tmp_path, url, queue, overlap):
    (tmp_path / "ovapp.py").write_text(OVERLAP_APP)
    log = tmp_path / "spans.log"
    log.touch()
    env = {**os.environ, "ECHOMQ_URL": url, "T_QUEUE": queue, "T_LOG": str(log),
           "T_OVERLAP": overlap}
    err = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - a file, never a full pipe
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "worker", "ovapp:app", "--concurrency", "4",
         "--beat-ms", "50", "--log-level", "warning"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: len(log.read_text().splitlines()) >= 4, 30, "four runs",
                 detail=lambda: (tmp_path / "worker.log").read_text()[-2000:])
    finally:
        kill_all([proc])
    spans = sorted(tuple(json.loads(line)) for line in log.read_text().splitlines())
    overlapping = sum(b[0] < a[1] for a, b in itertools.pairwise(spans))
    if overlap == "allow":
        assert overlapping > 0  # a run every 200 ms, each 500 ms long: they overlap
    else:
        assert overlapping == 0, spans  # never two at once
    if overlap == "buffer_all":
        # the held ones run back to back: each starts right after the one before ends
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(spans)]
        assert max(gaps) < 300, gaps
