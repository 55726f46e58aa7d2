"""The Celery docs' calls, made the EchoMQ way (start ``echomq worker tasks:app`` first).

Each line prints what the Celery documentation says its call returns; the test suite runs
this against a real worker (tests/e2e/test_ported_apps.py).
"""

from __future__ import annotations

import time

from echomq import chain, group

from tasks import add, app, collect, refresh_timeline, send_twitter_status, xsum

WAIT = 20  # seconds: AsyncResult.get(timeout=...)


def main() -> None:
    # add.delay(4, 4).get(timeout=10) == 8
    print("add.delay(4, 4) ->", app.result(add.enqueue(4, 4), timeout=WAIT))

    # add.apply_async((2, 2), countdown=1): runs a second later
    t0 = time.monotonic()
    later = add.enqueue_in(1_000, 2, 2)
    value = app.result(later, timeout=WAIT)
    print("apply_async(countdown=1) ->", value, "after >= 1 s:", time.monotonic() - t0 >= 1)

    # chain(add.s(2, 2), add.s(4), add.s(8))().get() == 16
    print("chain ->", app.result(chain(add.s(2, 2), add.s(4), add.s(8)).enqueue(),
                                 timeout=WAIT))

    # group(add.s(i, i) for i in range(10))().get() == [0, 2, 4, ..., 18]
    print("group ->", app.result(group(*(add.s(i, i) for i in range(10)))
                                 .then(collect.s()).enqueue(), timeout=WAIT))

    # chord((add.s(i, i) for i in range(10)), xsum.s())().get() == 90
    print("chord ->", app.result(group(*(add.s(i, i) for i in range(10)))
                                 .then(xsum.s()).enqueue(), timeout=WAIT))

    # autoretry_for=(FailWhaleError,): retried until it works
    print("autoretry_for ->", app.result(refresh_timeline.enqueue("ada"), timeout=WAIT))

    # raise self.retry(exc=exc, countdown=...)
    print("self.retry ->", app.result(send_twitter_status.enqueue("token", "hello"),
                                      timeout=WAIT))

    # AsyncResult(id).state of a finished job
    done = add.enqueue(1, 1)
    app.result(done, timeout=WAIT)
    info = app.job(done)
    print("AsyncResult.state ->", info.state if info else None)

    # add.apply_async((1, 1), task_id=...): the same id twice is one job
    first = add.options(job_id="JOB-celery-task-id").enqueue(1, 1)
    second = add.options(job_id="JOB-celery-task-id").enqueue(1, 1)
    print("task_id -> one job:", first == second == "JOB-celery-task-id")


if __name__ == "__main__":
    main()
