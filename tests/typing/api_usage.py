"""Type-checked by mypy in CI (not run): the verbs are typed per connector kind."""

from echomq import AsyncConnector, Connector
from echomq.core.outcomes import Outcome
from echomq.verbs import jobs, repeat
from echomq.verbs.jobs import Claim


def sync_use(conn: Connector) -> Claim | None:
    o: Outcome = jobs.enqueue(conn, "q", "JOB", b"x")
    assert o
    return jobs.claim(conn, "q", 1000)


async def async_use(conn: AsyncConnector) -> Claim | None:
    o: Outcome = await jobs.enqueue(conn, "q", "JOB", b"x")
    assert o
    return await jobs.claim(conn, "q", 1000)


def registrations(conn: Connector) -> list[int]:
    out: list[int] = []
    for r in repeat.records(conn, "q"):
        name: str = r.name
        every: int | None = r.every_ms
        cron: str | None = r.cron
        assert name and (every or cron) and r["template"] == r.template
        out.append(every or 0)
    return out
