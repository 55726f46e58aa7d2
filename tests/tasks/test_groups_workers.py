"""Groups under real worker processes (``echomq worker``) on a real Valkey: fairness between
tenants (asserted on the ORDER of completions), a group limit of 1 never exceeded by two
processes x 20, a group rate of 10/s held in every 1 s window of SERVER time and reached.

The handlers record SERVER timestamps: ``TIME`` around the work, and the claim's own instant
(the lease expiry the claim wrote on ``active``, less the lease), so the window checks read
the clock the rate limit itself reads."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import App
from echomq.verbs import groups
from tests.support.cli import kill_all
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

LEASE_MS = 30_000

APP = f'''
import os, time
import valkey
from echomq import App
from echomq.runtime.handler import current_job

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]
r = valkey.Valkey.from_url(os.environ["ECHOMQ_URL"])
ACTIVE = "emq:{{" + Q + "}}:active"
SLEEP = float(os.environ.get("T_SLEEP", "0"))

def micros():
    s, us = r.time()
    return s * 1_000_000 + us

@app.task(queue=Q, name="work", lease_ms={LEASE_MS}, group=lambda tenant, n: tenant)
def work(tenant, n):
    began = micros()
    claimed_ms = int(r.zscore(ACTIVE, current_job().id)) - {LEASE_MS}
    if SLEEP:
        time.sleep(SLEEP)
    r.rpush(Q + ":spans", f"{{tenant}} {{n}} {{began}} {{micros()}} {{claimed_ms}}")
'''


class Workers:
    def __init__(self, tmp_path, url: str, queue: str) -> None:
        (tmp_path / "gapp.py").write_text(APP)
        self.cwd, self.url, self.queue = tmp_path, url, queue
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs_: list[Any] = []

    def start(self, concurrency: int, sleep: float = 0, level: str = "warning") -> None:
        env = {**os.environ, "ECHOMQ_URL": self.url, "T_QUEUE": self.queue,
               "T_SLEEP": str(sleep)}
        # a file, not a pipe: a worker must never block on a full, unread stderr
        log = open(self.cwd / f"worker{len(self.procs)}.log", "wb")  # noqa: SIM115
        self.logs_.append(log)
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "worker", "gapp:app",
             "--concurrency", str(concurrency), "--log-level", level],
            cwd=self.cwd, env=env, stdout=subprocess.DEVNULL, stderr=log))

    def logs(self, tail: int = 3000) -> str:
        """What the workers wrote to stderr (the last ``tail`` characters of each)."""
        return "\n---\n".join(
            (self.cwd / f"worker{i}.log").read_text(errors="replace")[-tail:]
            for i in range(len(self.procs)))

    def close(self) -> None:
        kill_all(self.procs)
        for log in self.logs_:
            log.close()


@pytest.fixture
def workers(tmp_path, url, queue) -> Iterator[Workers]:
    w = Workers(tmp_path, url, queue)
    yield w
    w.close()


@pytest.fixture
def app(tmp_path, url, queue, monkeypatch) -> Iterator[App]:
    """The same app module the workers import, imported here to enqueue through it."""
    (tmp_path / "gapp.py").write_text(APP)
    monkeypatch.setenv("ECHOMQ_URL", url)
    monkeypatch.setenv("T_QUEUE", queue)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("gapp", None)
    import gapp  # type: ignore[import-not-found]

    yield gapp.app
    gapp.app.close()
    sys.modules.pop("gapp", None)


class Span:
    def __init__(self, line: bytes) -> None:
        tenant, n, began, ended, claimed = line.decode().split()
        self.tenant, self.n = tenant, int(n)
        self.began, self.ended, self.claimed_ms = int(began), int(ended), int(claimed)


def spans(raw, queue: str) -> list[Span]:
    return [Span(x) for x in raw.lrange(f"{queue}:spans", 0, -1)]


def test_small_tenants_finish_long_before_a_large_one(app, workers, raw, queue):
    work = app.tasks["work"]
    # the large tenant is queued FIRST: a FIFO queue would run all of it before the others
    work.enqueue_many([("big", i) for i in range(1000)])
    work.enqueue_many([("mid", i) for i in range(100)])
    work.enqueue_many([("small", i) for i in range(10)])
    assert {g: s.waiting for g, s in groups.stats(app.connector(), queue).items()} == {
        "big": 1000, "mid": 100, "small": 10}
    workers.start(concurrency=4, level="info")
    wait_for(lambda: raw.llen(f"{queue}:spans") == 1110, 30, "1,110 completions",
             every=0.05, detail=workers.logs)
    order = [s.tenant for s in spans(raw, queue)]
    last = {t: max(i for i, x in enumerate(order) if x == t) for t in ("big", "mid", "small")}
    print(f"position of each tenant's last completion (of 1,110): {last}")
    # groups take turns: small's 10 are done within the first few rounds (~3 x 10), mid's
    # 100 within ~2 x 100 + small's, while big runs to the end
    assert last["small"] < 60, last
    assert last["mid"] < 300, last
    assert last["big"] == 1109
    assert sorted(s.n for s in spans(raw, queue) if s.tenant == "big") == list(range(1000))
    # the worker said at start what waited in which groups
    assert (f"queue {queue}: 3 groups, 1110 jobs waiting in their lanes, 0 active, "
            "0 paused groups") in workers.logs(tail=10**7)


def test_a_group_limit_of_one_holds_across_two_workers_of_twenty(app, workers, raw, queue):
    conn = app.connector()
    groups.set_limit(conn, queue, "solo", 1)
    work = app.tasks["work"]
    work.enqueue_many([("solo", i) for i in range(25)])
    work.enqueue_many([("free", i) for i in range(40)])
    workers.start(concurrency=20, sleep=0.02)
    workers.start(concurrency=20, sleep=0.02)
    wait_for(lambda: raw.llen(f"{queue}:spans") == 65, 60, "65 completions",
             every=0.05, detail=workers.logs)
    solo = sorted((s for s in spans(raw, queue) if s.tenant == "solo"), key=lambda s: s.began)
    assert len(solo) == 25
    for before, after in itertools.pairwise(solo):
        assert after.began >= before.ended, "two 'solo' jobs ran at once"
    # the limit is the group's, not the queue's: 'free' jobs overlapped each other
    free = sorted((s for s in spans(raw, queue) if s.tenant == "free"), key=lambda s: s.began)
    assert any(b.began < a.ended for a, b in itertools.pairwise(free))
    st = groups.stats(conn, queue)["solo"]
    assert (st.waiting, st.active, st.limit) == (0, 0, 1)


def test_a_group_rate_of_ten_per_second_holds_and_is_reached(app, workers, raw, queue):
    conn = app.connector()
    groups.set_rate(conn, queue, "api", 10, 1000)
    app.tasks["work"].enqueue_many([("api", i) for i in range(80)])
    workers.start(concurrency=20)
    workers.start(concurrency=20)
    wait_for(lambda: raw.llen(f"{queue}:spans") >= 51, 20, "51 starts",
             every=0.05, detail=workers.logs)
    starts = sorted(s.claimed_ms for s in spans(raw, queue))
    # never 11 starts within 1 s of SERVER time: the 11th is at least 1000 ms after the 1st
    for i in range(len(starts) - 10):
        assert starts[i + 10] - starts[i] >= 1000, (i, starts[i:i + 11])
    # and the rate is reached: 5 s from the first start hold at least 90 % of 50 starts
    first = starts[0]
    tightest = min(b - a for a, b in zip(starts, starts[10:], strict=False))
    print(f"starts in the first 5 s: {sum(1 for s in starts if s < first + 5000)} (max 50); "
          f"tightest 11-start span: {tightest} ms")
    assert sum(1 for s in starts if s < first + 5000) >= 45, starts
