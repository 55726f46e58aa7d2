"""The durable-steps drill (issue 35): worker processes (``echomq worker mod:app``)
SIGKILLed at random while their jobs run step k of n, many times over. A step's function
runs at least once; once its result is recorded it never runs again: every job's calls of
its step functions (pushed to a Valkey list by the function itself) never go back to an
earlier step, every step is recorded ``done`` in order, and every job completes with the
results of all its steps. Nothing lost."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
import valkey

from echomq.tasks.app import App
from tests.support.cli import kill_all, worker
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow

N_STEPS = 6
N_JOBS = 8
KILLS = 12

APP = f'''
import os, random, time
import valkey
from echomq import App, current_job

app = App(os.environ["ECHOMQ_URL"])
Q = os.environ["T_QUEUE"]
r = valkey.Valkey.from_url(os.environ["ECHOMQ_URL"])


def work(jid, j):
    r.rpush(Q + ":calls:" + jid, j)  # the call, before the (killable) work
    time.sleep(random.uniform(0.1, 0.3))
    return j * 10


@app.task(queue=Q, name="drill", lease_ms=600, keep_result=600, retry_delay_ms=10)
def drill():
    job = current_job()
    out = []
    for j in range({N_STEPS}):
        out.append(job.step(f"s{{j}}", work, job.id, j))
        if j == {N_STEPS} // 2:
            job.sleep("breathe", 30)  # a suspension under the kills too
    return out
'''


def test_sigkill_inside_steps_runs_each_recorded_step_once(tmp_path: Path, url: str,
                                                          queue: str) -> None:
    (tmp_path / "drill_mod.py").write_text(APP)
    app = App(url)
    raw = valkey.Valkey.from_url(url)
    drill = app.task(name="drill", queue=queue)(lambda: None)
    ids = [drill.enqueue() for _ in range(N_JOBS)]
    env = {"T_QUEUE": queue}
    log = tmp_path / "workers.log"
    procs = []
    rng = random.Random(35)

    def calls() -> int:
        return sum(raw.llen(f"{queue}:calls:{j}") for j in ids)

    try:
        for _ in range(KILLS):
            if all(raw.llen(f"{queue}:calls:{j}") >= N_STEPS for j in ids):
                break  # every job is in its last step: the final worker finishes them
            proc = worker("drill_mod:app", "--concurrency", str(N_JOBS), url=url,
                          cwd=tmp_path, log=log, env=env)
            procs.append(proc)
            # killed once it is under way (about a step or two more per job: the reaper
            # dead-letters a job that stalls 3 times in one step, its poison-pill guard),
            # at a random instant: most kills land inside a step function
            seen = calls()
            more = rng.randint(N_JOBS, 2 * N_JOBS)
            wait_for(lambda seen=seen, more=more: calls() >= seen + more, 60,
                     "the worker to run steps", detail=lambda: str(
                         [(app.job(j).state, raw.lrange(f"{queue}:calls:{j}", 0, -1))
                          for j in ids]) + log.read_text()[-3000:])
            time.sleep(rng.uniform(0, 0.3))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        procs.append(worker("drill_mod:app", "--concurrency", str(N_JOBS), url=url,
                            cwd=tmp_path, log=log, env=env))
        results = {jid: app.result(jid, timeout=60) for jid in ids}
    finally:
        kill_all(procs)
    expected = [j * 10 for j in range(N_STEPS)]
    interrupted = 0
    for jid in ids:
        assert results[jid] == expected, jid
        calls = [int(c) for c in raw.lrange(f"{queue}:calls:{jid}", 0, -1)]
        # never back to an earlier step: a recorded step's function is not called again
        assert calls == sorted(calls), (jid, calls)
        assert set(calls) == set(range(N_STEPS)), (jid, calls)
        interrupted += len(calls) - N_STEPS  # a step cut short by a kill ran again
    # the kills did land inside steps (else the drill proved nothing)
    assert interrupted > 0
    app.close()
    raw.close()
