"""saq (``saq[redis,hiredis]`` on PyPI).

Per-job: ``Queue.enqueue`` (``scheduled=`` epoch seconds for a run-at: saq stores whole
seconds, which is why the release instant is always a whole second). saq has no bulk call:
"bulk" is CHUNK ``enqueue`` calls in flight at once (``asyncio.gather``), as saq's own
benchmark does. Worker: ``saq.Worker`` with ``concurrency`` and default timers (the
schedule poll runs every 1 s).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from _common import CHUNK, RECORD, SCHEDULE_AHEAD_S, TASK, chunks, parse, ready, report
from saq import Queue, Worker


async def noop(ctx: Any) -> None:
    RECORD()


noop.__qualname__ = noop.__name__ = TASK


async def produce(args: Any) -> None:
    queue = Queue.from_url(args.url, name=args.queue)
    await queue.connect()
    n = args.n

    def opts() -> dict[str, Any]:
        if args.scenario.startswith("schedule"):
            return {"scheduled": int(time.time()) + SCHEDULE_AHEAD_S}
        if args.scenario == "load-at":
            return {"scheduled": round(args.due)}
        return {}

    t0 = time.perf_counter()
    if args.scenario in ("enqueue-one", "schedule-one"):
        for _ in range(n):
            await queue.enqueue(TASK, **opts())
    else:
        for part in chunks(n, CHUNK):
            await asyncio.gather(*(queue.enqueue(TASK, **opts()) for _ in part))
    elapsed = time.perf_counter() - t0
    await queue.disconnect()
    report(seconds=elapsed, n=n)


async def work(args: Any) -> None:
    RECORD.arm(args.n, args.out)
    queue = Queue.from_url(args.url, name=args.queue)
    worker = Worker(queue, functions=[noop], concurrency=args.concurrency)
    ready()
    await worker.start()


def main() -> None:
    args = parse()
    asyncio.run(produce(args) if args.role == "produce" else work(args))


if __name__ == "__main__":
    main()
