"""Batches end to end: members on several queues, the callbacks each once with the
BatchInfo, a member adding more through current_job().batch, an empty batch, death."""

from __future__ import annotations

import asyncio
import threading

import pytest

from echomq.runtime.handler import current_job
from echomq.tasks.worker import Worker
from echomq.verbs import batches
from echomq.verbs.batches import BatchInfo
from tests.support.workers import run_until


def _serve(app, queues, done, timeout=20):
    async def main() -> None:
        worker = Worker(app, queues, concurrency=8, beat_ms=50, grace_s=2)
        assert await run_until(worker, done, timeout) == 0

    asyncio.run(main())


@pytest.mark.topologies  # on a cluster too: the members' queues and the batch on 3 slots
def test_a_batch_fires_complete_and_success_once_with_its_info(app, queue):
    calls: list[tuple[str, dict]] = []
    ran: list[int] = []
    lock = threading.Lock()

    @app.task(queue=queue, name="b_send")
    def send(n: int) -> None:
        with lock:
            ran.append(n)

    @app.task(queue=queue + "-cb", name="b_done")
    def done(tag: str, info: dict) -> None:
        with lock:
            calls.append((tag, info))

    with app.batch(on_complete=done.s("complete"), on_success=done.s("success"),
                   on_death=done.s("death")) as b:
        b.add(send.s(1), send.s(2))
        send.enqueue(3)  # joins b inside the block
        assert app.batch_info(b.id) == BatchInfo(3, 3, 0, 0, False)
    assert app.batch_info(b.id) == BatchInfo(3, 3, 0, 0, True)

    _serve(app, [queue, queue + "-cb"], lambda: len(calls) >= 2)
    assert sorted(ran) == [1, 2, 3]
    assert sorted(t for t, _ in calls) == ["complete", "success"]
    for _, info in calls:
        assert info == {"total": 3, "pending": 0, "completed": 3, "dead": 0, "closed": True}
    assert app.batch_info(b.id) == BatchInfo(3, 0, 3, 0, True)


def test_a_member_adds_more_and_the_batch_waits_for_them(app, queue):
    calls: list[dict] = []
    ran: list[str] = []

    @app.task(queue=queue, name="b_leaf")
    def leaf(name: str) -> None:
        ran.append(name)

    @app.task(queue=queue, name="b_root")
    def root() -> None:
        batch = current_job().batch
        assert batch is not None
        batch.add(leaf.s("x"), leaf.s("y"))
        ran.append("root")

    @app.task(queue=queue, name="b_cb")
    def cb(info: dict) -> None:
        calls.append(info)

    with app.batch(on_complete=cb.s()):
        root.enqueue()
    _serve(app, [queue], lambda: bool(calls))
    assert sorted(ran) == ["root", "x", "y"]
    assert calls == [{"total": 3, "pending": 0, "completed": 3, "dead": 0, "closed": True}]


def test_death_fires_on_death_and_complete_but_not_success(app, queue):
    calls: list[str] = []

    @app.task(queue=queue, name="b_bad", max_attempts=1)
    def bad() -> None:
        raise RuntimeError("no")

    @app.task(queue=queue, name="b_ok")
    def ok() -> None:
        pass

    @app.task(queue=queue, name="b_cb2")
    def cb(tag: str, info: dict) -> None:
        calls.append(tag)

    with app.batch(on_complete=cb.s("complete"), on_success=cb.s("success"),
                   on_death=cb.s("death")) as b:
        b.add(bad.s(), bad.s(), ok.s())
    _serve(app, [queue], lambda: len(calls) >= 2)
    assert sorted(calls) == ["complete", "death"]
    assert app.batch_info(b.id) == BatchInfo(3, 0, 1, 2, True)


def test_an_empty_batch_fires_at_close_and_settle_counts_each_member_once(app, queue, conn):
    calls: list[str] = []

    @app.task(queue=queue, name="b_cb3")
    def cb(tag: str, info: dict) -> None:
        calls.append(tag)

    with app.batch(on_complete=cb.s("complete"), on_success=cb.s("success")) as b:
        pass
    assert app.batch_info(b.id) == BatchInfo(0, 0, 0, 0, True)
    _serve(app, [queue], lambda: len(calls) >= 2)
    assert sorted(calls) == ["complete", "success"]

    with app.batch() as b2:
        batches.enroll(conn, b2.id, ["JOBa", "JOBb"])
    batches.settle(conn, b2.id, [("JOBa", "completed")])
    again = batches.settle(conn, b2.id, [("JOBa", "completed"), ("JOBb", "dead")])
    assert again == BatchInfo(2, 0, 1, 1, True)  # JOBa's repeated notice counted once
    with pytest.raises(ValueError):
        batches.settle(conn, b2.id, [("JOBa", "retried")])


def test_only_the_admission_mark_names_a_batch():
    from echomq.runtime.batching import batch_of

    assert batch_of(b'{"args":[],"kwargs":{},"task":"t","batch":"JOB1"}') == "JOB1"
    assert batch_of(b'{"args":[],"kwargs":{"batch":"JOB1"},"task":"t"}') is None
    assert batch_of(b'{"args":["\\"batch\\":\\"x"],"task":"t"}') is None
    assert batch_of(b'{"args":[],"task":"t"}') is None


def test_a_member_cancelled_while_waiting_still_lets_its_batch_end(app, queue):
    # nobody runs the cancelled member: its end reaches the batch through the queue's flow
    # outbox, carried by the worker's beat
    calls: list[tuple[str, dict]] = []
    lock = threading.Lock()

    @app.task(queue=queue, name="b_wait")
    def wait(n: int) -> None:
        pass

    @app.task(queue=queue, name="b_cb4")
    def cb(tag: str, info: dict) -> None:
        with lock:
            calls.append((tag, info))

    with app.batch(on_complete=cb.s("complete"), on_success=cb.s("success")) as b:
        gone, _ = b.add(wait.s(1), wait.s(2))
    assert app.cancel(gone, queue=queue) == "cancelled"
    _serve(app, [queue], lambda: bool(calls))
    assert calls == [("complete", {"total": 2, "pending": 0, "completed": 1, "dead": 0,
                                   "closed": True})]  # once, and never success
    assert app.batch_info(b.id) == BatchInfo(2, 0, 1, 0, True)


def test_an_async_batch_takes_aadd_and_aenqueue(app, queue):
    calls: list[dict] = []
    ran: list[int] = []

    @app.task(queue=queue, name="ab_send")
    def send(n: int) -> None:
        ran.append(n)

    @app.task(queue=queue, name="ab_cb")
    def cb(info: dict) -> None:
        calls.append(info)

    async def main() -> None:
        async with app.batch(on_complete=cb.s()) as b:
            assert len(await b.aadd(send.s(1), send.s(2))) == 2
            await send.aenqueue(3)  # joins b inside the block
            assert await b.ainfo() == BatchInfo(3, 3, 0, 0, False)
        assert await b.ainfo() == BatchInfo(3, 3, 0, 0, True)
        await send.aenqueue(4)  # after the block: a plain job
        assert await b.ainfo() == BatchInfo(3, 3, 0, 0, True)
        worker = Worker(app, [queue], concurrency=8, beat_ms=50, grace_s=2)
        assert await run_until(worker, lambda: bool(calls) and len(ran) >= 4, 20) == 0

    asyncio.run(main())
    assert sorted(ran) == [1, 2, 3, 4]
    assert calls == [{"total": 3, "pending": 0, "completed": 3, "dead": 0, "closed": True}]


def test_enqueue_many_inside_a_batch_joins_it(app, queue):
    @app.task(queue=queue, name="bm_send")
    def send(n: int) -> None:
        pass

    with app.batch() as b:
        ids = send.enqueue_many([(1,), (2,)])
        with pytest.raises(TypeError):
            send.enqueue_many(["x"])  # each call a tuple, checked before anything is written
    assert len(ids) == 2 and app.batch_info(b.id) == BatchInfo(2, 2, 0, 0, True)

    async def main() -> None:
        async with app.batch() as ab:
            assert len(await send.aenqueue_many([(3,), (4,), (5,)])) == 3
        assert await ab.ainfo() == BatchInfo(3, 3, 0, 0, True)

    asyncio.run(main())
    assert send.enqueue_many([(6,)])  # outside a block: a plain job
    assert app.batch_info(b.id) == BatchInfo(2, 2, 0, 0, True)
