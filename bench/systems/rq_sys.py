"""RQ (``rq`` on PyPI): a sync library, so the per-job loop is plain calls.

Per-job: ``Queue.enqueue`` / ``Queue.enqueue_in``; bulk: ``Queue.enqueue_many`` (now) and
``enqueue_at`` on one shared pipeline (scheduled: ``enqueue_many`` takes no run-at).
Worker: ``SimpleWorker`` (no fork per job) with ``with_scheduler=True``: RQ's scheduler is
a forked process that moves due jobs once a second (its default interval).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from _common import CHUNK, RECORD, SCHEDULE_AHEAD_S, chunks, parse, ready, report
from redis import Redis
from rq import Queue, SimpleWorker


def noop() -> None:
    RECORD()


def produce(args: Any) -> None:
    import rq_sys  # the worker imports the handler by this module path

    redis = Redis.from_url(args.url)
    queue = Queue(args.queue, connection=redis)
    n, fn = args.n, rq_sys.noop
    ahead = dt.timedelta(seconds=SCHEDULE_AHEAD_S)
    t0 = time.perf_counter()
    if args.scenario == "enqueue-one":
        for _ in range(n):
            queue.enqueue(fn)
    elif args.scenario == "schedule-one":
        for _ in range(n):
            queue.enqueue_in(ahead, fn)
    elif args.scenario in ("enqueue-bulk", "load-now"):
        for part in chunks(n, CHUNK):
            queue.enqueue_many([Queue.prepare_data(fn) for _ in part])
    else:
        if args.scenario == "load-at":
            when = dt.datetime.fromtimestamp(args.due, tz=dt.UTC)
        for part in chunks(n, CHUNK):
            if args.scenario == "schedule-bulk":
                when = dt.datetime.now(dt.UTC) + ahead
            with redis.pipeline() as pipe:
                for _ in part:
                    queue.enqueue_at(when, fn, pipeline=pipe)
                pipe.execute()
    elapsed = time.perf_counter() - t0
    redis.close()
    report(seconds=elapsed, n=n)


def work(args: Any) -> None:
    import rq_sys

    rq_sys.RECORD.arm(args.n, args.out)
    redis = Redis.from_url(args.url)
    worker = SimpleWorker([Queue(args.queue, connection=redis)], connection=redis)
    ready()
    worker.work(with_scheduler=True, logging_level="WARNING")


def main() -> None:
    args = parse()
    (produce if args.role == "produce" else work)(args)


if __name__ == "__main__":
    main()
