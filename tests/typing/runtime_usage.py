"""Type-checked by mypy in CI (not run): handler code and the job-control API type-check
without casts or ``None`` checks (``current_job()`` is a ``Job``; ``options`` keeps the
task's parameters)."""

import datetime as dt

from echomq import App, current_job
from echomq.core.outcomes import Outcome
from echomq.runtime.handler import Job

app = App("valkey://127.0.0.1:6379/0")


@app.task(timeout=30, keep_result=dt.timedelta(hours=1))
def total(order_id: int, currency: str = "EUR") -> float:
    job: Job = current_job()
    if job.cancelled:
        return 0.0
    job.progress({"order": order_id})
    return 42.5


@app.task(timeout=dt.timedelta(seconds=5))
async def fetch(url: str) -> str:
    await current_job().aprogress(50)
    return url


def producer() -> None:
    job_id: str = total.options(priority=3, group="tenant-42").enqueue(7, currency="USD")
    owner: str = total.options(unique="order-7", unique_for=3600).enqueue_in(1000, 7)
    many: list[str] = total.enqueue_many([(1,), (2, "USD")])
    outcome: Outcome = app.cancel(job_id)
    value = app.result(owner, timeout=10)
    assert many and outcome and value is not None


async def aproducer() -> None:
    job_id: str = await fetch.options(priority=1).aenqueue("https://example.com")
    outcome: Outcome = await app.acancel(job_id)
    assert outcome and await app.aresult(job_id, timeout=1)
