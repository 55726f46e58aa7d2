"""Type-checked by mypy in CI (not run): the group API from handler and producer code, with
no casts: a group derived from the arguments, ``rate_limited`` in both forms (it never
returns, so the code after it is unreachable to the checker), the group controls."""

from echomq import App, RateLimited, current_job
from echomq.verbs import groups, jobs
from echomq.verbs.groups import GroupStats

app = App("valkey://127.0.0.1:6379/0")


@app.task(queue="sync", group=lambda tenant, page: f"tenant-{tenant}")
def sync_page(tenant: int, page: int) -> int:
    if page < 0:
        current_job().rate_limited(1000)
    return page


@app.task(queue="sync", group="reports")
async def report(month: str) -> str:
    if not month:
        await current_job().arate_limited(500)
    if month == "later":
        raise RateLimited(250)
    return month


def producer() -> None:
    job_id: str = sync_page.enqueue(42, 1)
    ids: list[str] = sync_page.enqueue_many([(42, 2), (7, 1)])
    vip: str = sync_page.options(group="vip").enqueue(7, 3)
    conn = app.connector()
    groups.set_limit(conn, "sync", "tenant-42", 2)
    groups.set_rate(conn, "sync", "tenant-42", 10, 1000)
    jobs.set_rate(conn, "sync", 100, 1000)
    stats: dict[str, GroupStats] = groups.stats(conn, "sync")
    waiting: int = stats["tenant-42"].waiting
    assert job_id and ids and vip and waiting >= 0
