"""The RQ docs' calls, made the EchoMQ way (start ``echomq worker tasks:app`` first).

Each line prints what RQ's documentation says the call gives; the test suite runs this
against a real worker (tests/e2e/test_ported_apps.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time

from echomq import dead

from tasks import Q, app, count_words_at_url, crunch, divide, fetch, r, say_hello

WAIT = 20  # seconds: job.latest_result(timeout=...)


def main() -> None:
    r.delete(f"{Q}:reports", f"{Q}:up:home")
    # job = q.enqueue(count_words_at_url, "http://nvie.com"); job.return_value()
    job = count_words_at_url.enqueue("http://nvie.com")
    print("count_words_at_url ->", app.result(job, timeout=WAIT))

    # q.enqueue(say_hello, retry=Retry(max=3, interval=[...])): two failures, then it works
    job = say_hello.enqueue("ada", 2)
    print("Retry(interval=[...]) ->", app.result(job, timeout=WAIT), "after",
          app.job(job).runs if app.job(job) else "?", "runs")

    # q.enqueue_in(timedelta(seconds=1), say_hello, "later")
    t0 = time.monotonic()
    job = say_hello.enqueue_in(dt.timedelta(seconds=1), "later")
    print("enqueue_in ->", app.result(job, timeout=WAIT), "after >= 1 s:",
          time.monotonic() - t0 >= 1)

    # on_success / on_failure callbacks
    app.result(divide.enqueue(1, 4), timeout=WAIT)
    failed = divide.enqueue(1, 0)
    try:
        app.result(failed, timeout=WAIT)
    except Exception as exc:  # errors.JobFailed: job.get_status() == "failed"
        print("failed job ->", type(exc).__name__)
    deadline = time.monotonic() + WAIT
    while r.llen(f"{Q}:reports") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    for line in r.lrange(f"{Q}:reports", 0, -1):
        print("callback ->", line.decode())

    # job.meta["progress"], read by another process
    job = crunch.enqueue(3)
    app.result(job, timeout=WAIT)
    print("meta (progress) ->", app.job(job).progress if app.job(job) else None)

    # FailedJobRegistry(queue=q).get_job_ids(); registry.requeue(job_id)
    down = fetch.enqueue("home")
    with contextlib.suppress(Exception):
        app.result(down, timeout=WAIT)
    failed_ids = [row["id"] for row in dead.list_dead(app.connector(), Q)]
    print("failed registry has it ->", down in failed_ids)
    r.set(f"{Q}:up:home", 1)  # the page is back
    dead.revive(app.connector(), Q, down)
    print("requeue ->", app.result(down, timeout=WAIT))

    # q.enqueue(f, job_id="my_job_id") twice: one job
    first = say_hello.options(job_id="JOB-my_job_id").enqueue("once")
    second = say_hello.options(job_id="JOB-my_job_id").enqueue("twice")
    print("job_id -> one job:", first == second)


if __name__ == "__main__":
    main()
