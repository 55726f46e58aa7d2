"""Tenant controls declared on the task: group_by (an argument, or a function of the
arguments), group_limit/group_rate (every group's defaults) and queue_limit (the queue cap),
applied on the server when a worker starts."""

from __future__ import annotations

import asyncio
import threading

import pytest

from echomq.core import keyspace
from echomq.tasks.worker import Worker
from echomq.verbs import groups, jobs
from echomq.verbs.groups import GroupDefaults
from tests.support.workers import run_until


def test_group_by_an_argument_names_each_runs_group(app, raw, queue):
    @app.task(queue=queue, name="send", group_by="tenant_id")
    def send(body: str, tenant_id: int = 7) -> None:
        pass

    a = send.enqueue("x", 42)
    b = send.enqueue("y")  # the default applies
    c = send.enqueue("z", tenant_id=None)  # None: no group
    assert raw.hget(keyspace.job_key(queue, a), "group") == b"42"
    assert raw.hget(keyspace.job_key(queue, b), "group") == b"7"
    assert raw.hget(keyspace.job_key(queue, c), "group") is None


def test_group_by_a_function_of_the_arguments(app, raw, queue):
    @app.task(queue=queue, name="send2", group_by=lambda org, n: f"org-{org}")
    def send2(org: str, n: int) -> None:
        pass

    jid = send2.enqueue("acme", 1)
    assert raw.hget(keyspace.job_key(queue, jid), "group") == b"org-acme"


def test_tenant_options_are_checked_at_declaration(app, queue):
    def f(tenant: str) -> None:
        pass

    with pytest.raises(TypeError, match="no parameter 'tenant_id'"):
        app.task(queue=queue, name="f1", group_by="tenant_id")(f)
    with pytest.raises(TypeError, match="not both"):
        app.task(queue=queue, name="f2", group_by="tenant", group="x")(f)
    with pytest.raises(ValueError):
        app.task(queue=queue, name="f3", group_limit=0)(f)
    with pytest.raises(ValueError):
        app.task(queue=queue, name="f4", queue_limit=-1)(f)


def test_a_worker_applies_the_declared_defaults_and_cap(app, queue):
    at_once: list[int] = []
    lock = threading.Lock()
    running = [0]
    done: list[str] = []

    @app.task(queue=queue, name="tenant_job", group_by="tenant", group_limit=1,
              group_rate="100/s", queue_limit=2)
    def tenant_job(tenant: str, n: int) -> None:
        with lock:
            running[0] += 1
            at_once.append(running[0])
        threading.Event().wait(0.02)
        with lock:
            running[0] -= 1
            done.append(tenant)

    for i in range(4):
        for t in ("a", "b", "c"):
            tenant_job.enqueue(t, i)

    async def main() -> None:
        worker = Worker(app, [queue], concurrency=8, beat_ms=50, grace_s=2)
        assert await run_until(worker, lambda: len(done) >= 12, 20) == 0

    asyncio.run(main())
    conn = app.connector()
    assert groups.defaults(conn, queue) == GroupDefaults(1, 100, 1000)
    assert jobs.queue_limit(conn, queue) == 2
    assert len(done) == 12
    assert max(at_once) <= 2  # the queue cap across the worker's 8 slots
