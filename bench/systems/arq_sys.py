"""arq (``arq`` on PyPI), in its own virtualenv with redis-py < 6.

Per-job: ``ArqRedis.enqueue_job`` (``_defer_by`` for +60 s; ``_defer_until`` for the
release instant). arq has no bulk call: "bulk" here is CHUNK ``enqueue_job`` calls in
flight at once (``asyncio.gather``) over its pool. Worker: ``arq.Worker`` with
``max_jobs`` = the concurrency and its default 0.5 s ``poll_delay``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

from _common import CHUNK, RECORD, SCHEDULE_AHEAD_S, TASK, chunks, parse, ready, report
from arq import Worker, create_pool
from arq.connections import RedisSettings


async def noop(ctx: Any) -> None:
    RECORD()


noop.__qualname__ = noop.__name__ = TASK


async def produce(args: Any) -> None:
    pool = await create_pool(RedisSettings.from_dsn(args.url))
    n = args.n
    ahead = dt.timedelta(seconds=SCHEDULE_AHEAD_S)

    def opts() -> dict[str, Any]:
        if args.scenario.startswith("schedule"):
            return {"_defer_by": ahead}
        if args.scenario == "load-at":
            return {"_defer_until": dt.datetime.fromtimestamp(args.due, tz=dt.UTC)}
        return {}

    t0 = time.perf_counter()
    if args.scenario in ("enqueue-one", "schedule-one"):
        for _ in range(n):
            await pool.enqueue_job(TASK, **opts())
    else:
        for part in chunks(n, CHUNK):
            await asyncio.gather(*(pool.enqueue_job(TASK, **opts()) for _ in part))
    elapsed = time.perf_counter() - t0
    await pool.aclose()
    report(seconds=elapsed, n=n)


async def work(args: Any) -> None:
    RECORD.arm(args.n, args.out)
    worker = Worker(functions=[noop], redis_settings=RedisSettings.from_dsn(args.url),
                    max_jobs=args.concurrency, handle_signals=False)
    ready()
    await worker.async_run()


def main() -> None:
    args = parse()
    asyncio.run(produce(args) if args.role == "produce" else work(args))


if __name__ == "__main__":
    main()
