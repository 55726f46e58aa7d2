"""The arq docs' calls, made the EchoMQ way (start ``echomq worker tasks:app`` first).

Each line prints what arq's documentation says the call gives (where arq answers ``None``
for a duplicate ``_job_id``, EchoMQ answers the existing job's id); the test suite runs this
against a real worker (tests/e2e/test_ported_apps.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

from tasks import PAGES, app, download_content, the_task

WAIT = 20  # seconds: await job.result(timeout=...)


async def main() -> None:
    # redis = await create_pool(RedisSettings()); await redis.enqueue_job(...) per url
    jobs = [await download_content.aenqueue(url) for url in PAGES]
    lengths = [await app.aresult(job, timeout=WAIT) for job in jobs]
    print("download_content ->", lengths)
    github = await app.ajob(jobs[-1])
    print("Retry(defer=...) -> github after", github.runs if github else "?", "tries")

    # job = await redis.enqueue_job("the_task", 21); await job.result(timeout=5)
    print("job.result() ->", await app.aresult(await the_task.aenqueue(21), timeout=WAIT))

    # await redis.enqueue_job("the_task", 1, _defer_by=timedelta(seconds=1))
    t0 = time.monotonic()
    later = await the_task.aenqueue_in(dt.timedelta(seconds=1), 1)
    print("_defer_by ->", await app.aresult(later, timeout=WAIT), "after >= 1 s:",
          time.monotonic() - t0 >= 1)

    # await redis.enqueue_job("the_task", 5, _job_id="foobar") twice: arq answers None
    # the second time; EchoMQ answers the same job's id (and writes nothing)
    first = await the_task.options(job_id="JOB-foobar").aenqueue(5)
    second = await the_task.options(job_id="JOB-foobar").aenqueue(5)
    print("_job_id -> one job:", first == second == "JOB-foobar")
    await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
