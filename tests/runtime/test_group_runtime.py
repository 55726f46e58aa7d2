"""The group runtime in one process against a real Valkey, at wire 4 and 6:
``rate_limited`` (the job goes back without spending an attempt, its group or the queue
claims nothing for the span, idle consumers wake at the reopen rather than at their next
beat), a grouped job's promote and self-delay at wire 6, and ``@app.task(group=...)``."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from echomq import AsyncConnector, Delay, RateLimited, current_job
from echomq.core import ids
from echomq.core import keyspace as ks
from echomq.runtime.consumer import Consumer
from echomq.runtime.events import Event
from echomq.verbs import groups, jobs
from tests.support.clients import WIRES

LONG_BEAT_MS = 3_000  # far longer than any span below: a wake by the beat would show


async def server_ms(conn: Any) -> int:
    return int(await jobs.server_now_ms(conn))


def consume(url: str, queue: str, handler: Any, *, wire: int, seconds: float,
            until: Any = None, **options: Any) -> list[Event]:
    """Run a Consumer until ``until()`` holds (or ``seconds`` pass); its events."""
    events: list[Event] = []

    async def main() -> None:
        conn = await AsyncConnector.connect(url, wire=wire)
        stop = asyncio.Event()
        consumer = Consumer(conn, queue, handler, on_event=events.append, **options)
        task = asyncio.ensure_future(consumer.serve(stop, grace_s=5))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while loop.time() < deadline and not (until and until(events)):
            await asyncio.sleep(0.01)
        stop.set()
        await task
        await conn.close()

    asyncio.run(main())
    return events


def kinds(events: list[Event], job_id: str) -> list[str]:
    return [e.kind for e in events if e.job_id == job_id]


def done(n: int) -> Any:
    return lambda events: sum(e.kind == "completed" for e in events) >= n


@pytest.mark.slow
@pytest.mark.parametrize("wire", WIRES)
def test_rate_limited_group_waits_its_span_and_others_run(url, conn, queue, wire):
    x, y, z = ids.mint(), ids.mint(), ids.mint()
    groups.set_limit(conn, queue, "g", 1)
    jobs.enqueue(conn, queue, x, b"x", group="g")
    jobs.enqueue(conn, queue, y, b"y", group="g")
    jobs.enqueue(conn, queue, z, b"z", group="h")
    seen: list[tuple[bytes, int, int]] = []  # payload, attempts, SERVER ms at start

    async def handler(job: Any) -> None:
        seen.append((job.payload, job.attempts, await server_ms(job._conn)))
        if job.payload == b"x" and len([s for s in seen if s[0] == b"x"]) == 1:
            # by now the idle claim loop is deep in a (3 s) wait on its wake list
            await asyncio.sleep(0.2)
            await current_job().arate_limited(400)

    events = consume(url, queue, handler, wire=wire, seconds=10, until=done(3),
                     concurrency=4, beat_ms=LONG_BEAT_MS)
    assert kinds(events, x) == ["started", "rate_limited", "started", "completed"]
    limited = next(e for e in events if e.kind == "rate_limited")
    assert limited.info["ms"] == 400
    order = [p for p, _, _ in seen]
    # z's group is not blocked: it ran at once; y waited behind x (limit 1, then blocked)
    assert order.index(b"z") < order.index(b"y")
    (x1, x2), = [[t for p, _, t in seen if p == b"x"]]
    y_at = next(t for p, _, t in seen if p == b"y")
    assert x2 - x1 >= 600 and y_at - x1 >= 600
    # woken at the reopen, not by the (3 s) beat
    assert x2 - x1 < 600 + LONG_BEAT_MS // 2
    # no attempt spent: the second run is attempt 1 again
    assert [a for p, a, _ in seen if p == b"x"] == [1, 1]


@pytest.mark.slow
@pytest.mark.parametrize("wire", WIRES)
def test_rate_limited_flat_job_blocks_the_queue(url, conn, queue, wire):
    x, y = ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, x, b"x")
    jobs.enqueue(conn, queue, y, b"y")
    starts: list[tuple[bytes, int]] = []

    def handler(job: Any) -> None:  # a plain function: rate_limited raises in its thread
        starts.append((job.payload, jobs.server_now_ms(sync)))
        if len(starts) == 1:
            current_job().rate_limited(300)

    sync = conn
    events = consume(url, queue, handler, wire=wire, seconds=10, until=done(2),
                     concurrency=1, beat_ms=LONG_BEAT_MS)
    assert [p for p, _ in starts] == [b"x", b"x", b"y"]
    assert starts[1][1] - starts[0][1] >= 300
    assert starts[1][1] - starts[0][1] < 300 + LONG_BEAT_MS // 2
    limited = next(e for e in events if e.kind == "rate_limited")
    assert limited.job_id == x and limited.info["ms"] == 300
    assert jobs.counts(conn, queue)["dead"] == 0


def test_raising_rate_limited_spends_no_attempt_even_at_max_attempts_one(url, conn, queue):
    x = ids.mint()
    jobs.enqueue(conn, queue, x, b"x", group="g")
    runs: list[int] = []

    async def handler(job: Any) -> None:
        runs.append(job.attempts)
        if len(runs) < 3:
            raise RateLimited(50)

    events = consume(url, queue, handler, wire=4, seconds=10, until=done(1),
                     max_attempts=1, concurrency=2)
    assert kinds(events, x) == ["started", "rate_limited"] * 2 + ["started", "completed"]
    assert runs == [1, 1, 1]


def test_rate_limited_refuses_a_bad_span_before_any_io():
    with pytest.raises(ValueError):
        RateLimited(-1)
    with pytest.raises(ValueError):
        RateLimited(0)  # a block of no time would be a plain retry: say so in the handler
    assert RateLimited(dt.timedelta(seconds=2)).ms == 2000
    with pytest.raises(TypeError):
        RateLimited("soon")  # type: ignore[arg-type]


@pytest.mark.parametrize("wire", WIRES)
def test_a_grouped_job_promotes_and_self_delays_at_every_wire(url, conn, raw, queue, wire):
    x = ids.mint()
    jobs.enqueue_in(conn, queue, x, b"x", 50, group="g")
    runs: list[int] = []

    async def handler(job: Any) -> None:
        runs.append(job.attempts)
        if len(runs) == 1:
            raise Delay(50)  # EMQ.DELAY refuses a grouped row: the script serves it

    events = consume(url, queue, handler, wire=wire, seconds=10, until=done(1),
                     keep_completed=10)
    assert kinds(events, x) == ["started", "delayed", "started", "completed"]
    row = raw.hgetall(ks.job_key(queue, x))
    assert row[b"group"] == b"g" and row[b"state"] == b"completed"
    assert groups.stats(conn, queue)["g"].active == 0


# -- @app.task(group=...) ------------------------------------------------------------------


def lane(conn: Any, queue: str, group: str) -> list[bytes]:
    return list(conn.call("ZRANGE", ks.queue_key(queue, f"g:{group}:pending"), 0, -1))


def test_group_derived_from_the_arguments(app, conn, queue):
    @app.task(queue=queue, group=lambda tenant, *a, **k: f"tenant-{tenant}")
    def bill(tenant: int, amount: int, *, note: str = "") -> None: ...

    a = bill.enqueue(42, 10)
    b = bill.enqueue(7, 5, note="x")
    c = bill.options(group="vip").enqueue(42, 1)  # options override the derived group
    many = bill.enqueue_many([(42, 1), (7, 2), (9, 3)])
    assert lane(conn, queue, "tenant-42") == sorted([a.encode(), many[0].encode()])
    assert lane(conn, queue, "tenant-7") == sorted([b.encode(), many[1].encode()])
    assert lane(conn, queue, "tenant-9") == [many[2].encode()]
    assert lane(conn, queue, "vip") == [c.encode()]
    assert jobs.counts(conn, queue)["pending"] == 0


def test_a_fixed_group_and_none_from_the_function(app, conn, queue):
    @app.task(queue=queue, group="reports")
    def report() -> None: ...

    @app.task(queue=queue, group=lambda tenant: tenant or None)
    def maybe(tenant: str) -> None: ...

    r = report.enqueue()
    m = maybe.enqueue("")  # None: an ungrouped job, in pending
    assert lane(conn, queue, "reports") == [r.encode()]
    assert jobs.counts(conn, queue)["pending"] == 1 and m


def test_group_applies_to_async_enqueue(app, url, queue):
    @app.task(queue=queue, group=lambda tenant: tenant)
    def work(tenant: str) -> None: ...

    async def main() -> tuple[str, list[str], int]:
        jid = await work.aenqueue("acme")
        many = await work.aenqueue_many([("acme",), ("initech",)])
        conn = await app.aconnector()
        return jid, many, (await groups.stats(conn, queue))["acme"].waiting

    jid, many, waiting = asyncio.run(main())
    assert waiting == 2 and jid and len(many) == 2


def test_bad_groups_are_refused_at_declaration(app, queue):
    with pytest.raises(ValueError, match="group"):
        app.task(queue=queue, group="a{b}")(lambda: None)
    with pytest.raises(TypeError, match="group"):
        app.task(queue=queue, group=42)(lambda: None)  # type: ignore[arg-type]
    t = app.task(queue=queue, name="ok")(lambda: None)
    with pytest.raises(ValueError, match="group"):
        t.options(group="")


def test_a_bad_derived_group_is_refused_before_anything_is_written(app, conn, queue, snap):
    @app.task(queue=queue, group=lambda tenant: tenant)
    def work(tenant: Any) -> None: ...

    before = snap(queue)
    with pytest.raises(ValueError, match="work: group"):
        work.enqueue("a{b}")
    with pytest.raises(TypeError, match="work: group"):
        work.enqueue(42)
    with pytest.raises(ValueError, match="work: group"):
        work.enqueue_many([("fine",), ("a}b",)])  # all checked before the first write
    with pytest.raises(TypeError, match="work: group"):
        work.enqueue("x", "unexpected")  # the group function's own TypeError, named
    assert snap(queue) == before


ISOLATED = '''
import os
from echomq import current_job

def call_upstream(marker):
    if not os.path.exists(marker):
        open(marker, "w").close()
        current_job().rate_limited(50)  # raised in the child, settled by the worker
    return "done"
'''


def test_rate_limited_crosses_back_from_an_isolated_child(tmp_path, monkeypatch, url, app,
                                                          queue):
    (tmp_path / "iso_limits.py").write_text(ISOLATED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import iso_limits  # type: ignore[import-not-found]

    task = app.task(queue=queue, name="call_upstream", isolation="process", max_attempts=1,
                    group="api")(iso_limits.call_upstream)
    jid = task.enqueue(str(tmp_path / "marker"))
    events = consume(url, queue, None, wire=4, seconds=60, until=done(1),
                     router=app.router(queue))
    assert kinds(events, jid) == ["started", "rate_limited", "started", "completed"]
