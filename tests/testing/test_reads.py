"""``enqueued``/``assert_enqueued``/``refute_enqueued``, ``perform`` and ``inline``."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from decimal import Decimal
from typing import Any

import pytest

from echomq import Delay, Fail, Retry, current_job, testing
from echomq.tasks.app import App


def test_enqueued_lists_pending_lanes_and_scheduled(kit: App, queue: str) -> None:
    @kit.task(queue=queue, name="send")
    def send(to: str, subject: str = "hi", tags: tuple[str, ...] = ()) -> None: ...

    now = send.enqueue("a@b.c", subject="x", tags=("t1",))
    lane = send.options(group="tenant-1").enqueue("g@b.c")
    later = send.enqueue_in(dt.timedelta(hours=1), "later@b.c")
    found = testing.enqueued(kit, send)
    assert [(j.id, j.state) for j in found] == [
        (now, "pending"), (lane, "pending"), (later, "scheduled")]
    assert found[1].group == "tenant-1" and found[2].run_at is not None
    assert [j.id for j in testing.enqueued(kit, send.name, kwargs={"subject": "x"})] == [now]
    # matched after the payload's JSON: a tuple is the list the job carries
    assert [j.id for j in testing.enqueued(kit, send, kwargs={"tags": ("t1",)})] == [now]
    assert [j.id for j in testing.enqueued(kit, args=["later@b.c"])] == [later]


def test_assert_enqueued_counts_and_lists_what_is_there(kit: App, queue: str) -> None:
    @kit.task(queue=queue, name="send")
    def send(to: str) -> None: ...

    @kit.task(queue=queue, name="other")
    def other(n: int) -> None: ...

    send.enqueue("a@b.c")
    send.enqueue("a@b.c")
    other.enqueue(7)
    assert len(testing.assert_enqueued(send, args=["a@b.c"], count=2)) == 2
    with pytest.raises(AssertionError) as info:
        testing.assert_enqueued(send, args=["z@b.c"])
    text = str(info.value)
    assert "expected at least 1 send(args=['z@b.c']) enqueued, found 0" in text
    assert "send(args=['a@b.c']" in text and "other(args=[7]" in text
    with pytest.raises(AssertionError, match="exactly 1"):
        testing.assert_enqueued(send, count=1)
    testing.refute_enqueued(send, args=["z@b.c"])
    with pytest.raises(AssertionError, match="expected no other"):
        testing.refute_enqueued(other)


def test_assert_enqueued_on_an_empty_queue_says_so(kit: App, queue: str) -> None:
    @kit.task(queue=queue, name="send")
    def send(to: str) -> None: ...

    with pytest.raises(AssertionError, match=f"nothing is enqueued on {queue}"):
        testing.assert_enqueued(send)


def test_perform_round_trips_and_writes_nothing(kit: App, queue: str) -> None:
    @kit.task(queue=queue, keep_result=60)
    def shape(pair: tuple[int, int], opts: dict[str, Any]) -> Any:
        job = current_job()
        assert job.queue == queue and job.attempts == 1
        return {"pair": pair, "opts": opts, "t": (1, 2)}

    assert testing.perform(shape, (1, 2), {"k": None}) == {
        "pair": [1, 2], "opts": {"k": None}, "t": [1, 2]}
    assert testing.enqueued(kit, shape) == []
    with pytest.raises(TypeError, match="missing a required argument"):
        testing.perform(shape, (1, 2))
    with pytest.raises(TypeError):
        testing.perform(shape, Decimal("1.0"), {})  # enqueue would refuse it too


def test_perform_raises_verdicts_as_such(kit: App, queue: str) -> None:
    @kit.task(queue=queue, name="judged")
    def judged(how: str) -> None:
        if how == "fail":
            raise Fail("final")
        if how == "retry":
            raise Retry(1_000)
        current_job().delay(5_000)

    with pytest.raises(Fail, match="final"):
        testing.perform(judged, "fail")
    with pytest.raises(Retry):
        testing.perform(judged, "retry")
    with pytest.raises(Delay):
        testing.perform(judged, "delay")


def test_perform_keeps_the_tasks_timeout(kit: App, queue: str) -> None:
    @kit.task(queue=queue, timeout=0.05)
    def slow() -> None:
        time.sleep(0.5)

    @kit.task(queue=queue, timeout=0.05)
    async def aslow() -> None:
        await asyncio.sleep(5)

    for task in (slow, aslow):
        with pytest.raises(TimeoutError, match=r"timeout of 0\.05 s"):
            testing.perform(task)


def test_perform_refuses_a_kept_result_json_cannot_carry(kit: App, queue: str) -> None:
    @kit.task(queue=queue, keep_result=60)
    def odd() -> Any:
        return {1, 2}

    @kit.task(queue=queue, name="loose")
    def loose() -> Any:
        return {1, 2}

    with pytest.raises(TypeError, match="not JSON-serializable"):
        testing.perform(odd)
    assert testing.perform(loose) == {1, 2}  # no result kept: returned as the handler did


def test_inline_runs_at_enqueue_and_records_the_outcome(kit: App, queue: str) -> None:
    ran: list[str] = []

    @kit.task(queue=queue, keep_result=60)
    def welcome(user: str) -> str:
        ran.append(user)
        follow.enqueue(user)
        return f"hi {user}"

    @kit.task(queue=queue, max_attempts=2)
    def follow(user: str) -> None:
        ran.append(f"follow {user}")
        raise OSError("smtp down")

    with testing.inline(kit) as got:
        jid = welcome.enqueue("ada")
        assert ran == ["ada", "follow ada"]  # both ran before enqueue returned
        assert kit.job(jid).result == "hi ada"
    assert (got.completed, got.retried) == (1, 1)
    assert list(got.errors.values()) == ["OSError: smtp down"]
    # the retry waits on the schedule, as in production; after the block, enqueue queues
    assert [j.state for j in testing.enqueued(kit, follow)] == ["scheduled"]
    welcome.enqueue("bob")
    assert ran == ["ada", "follow ada"]
    assert len(testing.enqueued(kit, welcome)) == 1


def test_inline_async_enqueue(kit: App, queue: str) -> None:
    @kit.task(queue=queue, keep_result=60)
    async def square(n: int) -> int:
        return n * n

    async def main() -> list[int]:
        with testing.inline(kit):
            ids = [await square.aenqueue(n) for n in (2, 3)]
        return [(await kit.ajob(i)).result for i in ids]  # type: ignore[union-attr]

    assert asyncio.run(main()) == [4, 9]


def test_inline_is_not_nested(kit: App) -> None:
    with testing.inline(kit), pytest.raises(RuntimeError, match="already on"), \
            testing.inline(kit):
        pass
    assert "registered" not in vars(kit)
