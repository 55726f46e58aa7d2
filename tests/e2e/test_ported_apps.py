"""The three apps ported from Celery, RQ and arq (examples/from_*) run as a user runs them:
``echomq worker tasks:app`` in the example's directory, then its ``run.py``, whose lines
must be what the original library's documentation says the same calls give."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # a worker process and a producer per app

EXPECTED = {
    "from_celery": [
        "add.delay(4, 4) -> 8",
        "apply_async(countdown=1) -> 4 after >= 1 s: True",
        "chain -> 16",
        "group -> [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]",
        "chord -> 90",
        "autoretry_for -> timeline of ada refreshed after 3 runs",
        "self.retry -> sent 'hello' after 2 runs",
        "AsyncResult.state -> completed",
        "task_id -> one job: True",
    ],
    "from_rq": [
        "count_words_at_url -> 10",
        "Retry(interval=[...]) -> Hello ada! after 3 runs",
        "enqueue_in -> Hello later! after >= 1 s: True",
        "failed job -> JobFailed",
        "callback -> success divide -> 0.25",
        "callback -> failure divide: ZeroDivisionError: division by zero",
        "meta (progress) -> {'done': 3, 'of': 3}",
        "failed registry has it -> True",
        "requeue -> home fetched",
        "job_id -> one job: True",
    ],
    "from_arq": [
        "download_content -> [133, 313, 93]",
        "Retry(defer=...) -> github after 3 tries",
        "job.result() -> 42",
        "_defer_by -> 2 after >= 1 s: True",
        "_job_id -> one job: True",
    ],
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_a_ported_app_gives_the_originals_documented_results(example, url):
    where = ROOT / "examples" / example
    env = {**os.environ, "ECHOMQ_URL": url, "PYTHONUNBUFFERED": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    worker = subprocess.Popen([sys.executable, "-m", "echomq.cli", "worker", "tasks:app",
                               "--beat-ms", "50"], cwd=where, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        done = subprocess.run([sys.executable, "run.py"], cwd=where, env=env,
                              capture_output=True, text=True, timeout=120)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            out, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, _ = worker.communicate()
    assert done.returncode == 0, f"{done.stderr}\n--- the worker said:\n{out}"
    assert done.stdout.splitlines() == EXPECTED[example], f"--- the worker said:\n{out}"
    assert worker.returncode == 0, out
