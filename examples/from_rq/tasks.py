"""A small RQ app ported to EchoMQ: the functions RQ's docs enqueue, as tasks
(``echomq worker tasks:app`` runs them; RQ's ``rq worker``).

The RQ original is in docs/migrating.md; ``run.py`` makes the RQ docs' calls the EchoMQ way.
RQ's callbacks get the Redis connection; these get a ``Settled`` (the job and its outcome)
and write to Valkey with their own client, as RQ's would.
"""

from __future__ import annotations

import datetime as dt

import valkey

from echomq import App, current_job

RESULT_TTL = 500  # RQ keeps a result 500 s by default (result_ttl)

# RQ keeps a finished job (its meta, its status) as long as its result: so does this app
app = App(keep_completed_for=dt.timedelta(seconds=RESULT_TTL))

Q = "rq-port"

# the pages count_words_at_url would fetch (no network in an example)
PAGES = {
    "http://nvie.com": "Vincent Driessen writes about Python, git branching and RQ itself",
}

r = valkey.Valkey.from_url(app.url)


@app.task(queue=Q, name="count_words_at_url", keep_result=RESULT_TTL)
def count_words_at_url(url: str) -> int:
    return len(PAGES[url].split())


# RQ: q.enqueue(say_hello, retry=Retry(max=3, interval=[10, 30, 60])): 3 retries = 4 runs,
# here in tenths of those seconds
@app.task(queue=Q, name="say_hello", max_attempts=4, backoff=[100, 300, 600],
          keep_result=RESULT_TTL)
def say_hello(name: str, fail_runs: int = 0) -> str:
    # RQ: job.retries_left; here the failures spent so far (current_job().failures)
    if current_job().failures < fail_runs:
        raise ConnectionError(f"run {current_job().runs} failed")
    return f"Hello {name}!"


# RQ: q.enqueue(f, on_success=report_success, on_failure=report_failure)
def report_success(settled, result):  # RQ: (job, connection, result, *args, **kwargs)
    r.rpush(f"{Q}:reports", f"success {settled.task} -> {result}")


def report_failure(settled, error):  # RQ: (job, connection, type, value, traceback)
    r.rpush(f"{Q}:reports", f"failure {settled.task}: {type(error).__name__}: {error}")


@app.task(queue=Q, name="divide", max_attempts=1, on_success=report_success,
          on_failure=report_failure, keep_result=RESULT_TTL)
def divide(a: int, b: int) -> float:
    return a / b


# RQ: job.meta["progress"] = ...; job.save_meta()
@app.task(queue=Q, name="crunch", keep_result=RESULT_TTL)
def crunch(steps: int) -> str:
    for done in range(1, steps + 1):
        current_job().progress({"done": done, "of": steps})
    return "crunched"


# RQ's FailedJobRegistry: a failed job waits there until requeued
@app.task(queue=Q, name="fetch", max_attempts=1, keep_result=RESULT_TTL)
def fetch(page: str) -> str:
    if not r.exists(f"{Q}:up:{page}"):
        raise ConnectionError(f"{page} is down")
    return f"{page} fetched"
