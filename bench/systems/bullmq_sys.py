"""BullMQ's Python port (``bullmq`` on PyPI), in its own virtualenv with redis-py < 8.

Per-job: ``Queue.add``; bulk: ``Queue.addBulk`` with CHUNK jobs; schedule: ``opts.delay``
in ms (BullMQ prices a delay on the producer's clock). Worker: ``bullmq.Worker`` with
``concurrency`` and every other option at its default.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from _common import CHUNK, RECORD, SCHEDULE_AHEAD_S, TASK, chunks, parse, ready, report
from bullmq import Queue, Worker

DATA: dict[str, Any] = {"args": []}


async def produce(args: Any) -> None:
    queue = Queue(args.queue, {"connection": args.url})
    n = args.n
    ahead = {"delay": SCHEDULE_AHEAD_S * 1000}
    t0 = time.perf_counter()
    if args.scenario == "enqueue-one":
        for _ in range(n):
            await queue.add(TASK, DATA)
    elif args.scenario == "schedule-one":
        for _ in range(n):
            await queue.add(TASK, DATA, ahead)
    else:
        for part in chunks(n, CHUNK):
            if args.scenario in ("enqueue-bulk", "load-now"):
                opts: dict[str, Any] = {}
            elif args.scenario == "schedule-bulk":
                opts = ahead
            else:  # load-at: the delay is priced now, on this host's clock, as BullMQ does
                opts = {"delay": max(0, round(args.due * 1000 - time.time() * 1000))}
            await queue.addBulk([{"name": TASK, "data": DATA, "opts": opts} for _ in part])
    elapsed = time.perf_counter() - t0
    await queue.close()
    report(seconds=elapsed, n=n)


async def work(args: Any) -> None:
    RECORD.arm(args.n, args.out)

    async def process(job: Any, token: Any) -> None:
        RECORD()

    worker = Worker(args.queue, process, {"connection": args.url,
                                         "concurrency": args.concurrency})
    ready()
    await asyncio.Event().wait()
    await worker.close()


def main() -> None:
    args = parse()
    asyncio.run(produce(args) if args.role == "produce" else work(args))


if __name__ == "__main__":
    main()
