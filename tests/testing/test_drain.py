"""``testing.drain``: the worker's path in the test process, on the real transitions."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from echomq import Delay, Fail, Retry, chain, current_job, jobs, testing
from echomq.tasks.app import App


def test_runs_each_job_once_with_results_errors_and_counts(kit: App, queue: str) -> None:
    seen: list[tuple[str, int]] = []

    @kit.task(queue=queue, max_attempts=3)
    def add(a: int, b: int) -> Any:
        job = current_job()
        seen.append((job.queue, job.attempts))
        if a < 0:
            raise ValueError("negative")
        return {"sum": a + b, "pair": (a, b)}

    ok = add.enqueue(1, 2)
    bad = add.enqueue(-1, 2)
    got = testing.drain(kit)
    assert (got.completed, got.retried, got.dead) == (1, 1, 0)
    assert got.results == {ok: {"sum": 3, "pair": [1, 2]}}  # JSON round trip: a list
    assert got.errors == {bad: "ValueError: negative"}
    assert seen == [(queue, 1), (queue, 1)]
    # the retry is on the schedule, as a worker leaves it
    assert kit.job(bad).state == "scheduled"
    assert testing.drain(kit).ran == 0


def test_with_scheduled_runs_retries_until_dead(kit: App, queue: str) -> None:
    @kit.task(queue=queue, max_attempts=3, backoff=[60_000])
    def flaky() -> None:
        raise OSError("down")

    jid = flaky.enqueue()
    got = testing.drain(kit, with_scheduled=True)
    assert (got.retried, got.dead, got.completed) == (2, 1, 0)
    assert kit.job(jid).state == "dead" and kit.job(jid).runs == 3


def test_verdicts_fail_retry_and_delay(kit: App, queue: str) -> None:
    @kit.task(queue=queue, max_attempts=5)
    def judged(how: str) -> None:
        if how == "fail":
            raise Fail("bad input")
        if how == "retry":
            raise Retry(dt.timedelta(hours=1))
        raise Delay(60_000)

    dead, retried, delayed = (judged.enqueue(h) for h in ("fail", "retry", "delay"))
    got = testing.drain(kit)
    assert (got.dead, got.retried, got.delayed) == (1, 1, 1)
    assert got.errors[dead] == "Fail: bad input"
    assert kit.job(retried).state == "scheduled" and kit.job(delayed).state == "scheduled"
    assert kit.job(delayed).failures == 0


def test_recursive_a_job_enqueued_by_a_job_runs_too(kit: App, queue: str) -> None:
    other = queue + "-b"
    order: list[str] = []

    @kit.task(queue=other)
    async def second(n: int) -> int:
        order.append(f"second {n}")
        return n * 10

    @kit.task(queue=queue)
    def first(n: int) -> None:
        order.append(f"first {n}")
        second.enqueue(n)

    first.enqueue(1)
    got = testing.drain(kit)
    assert order == ["first 1", "second 1"] and got.completed == 2
    assert 10 in got.results.values()


def test_queues_are_honoured(kit: App, queue: str) -> None:
    other = queue + "-other"

    @kit.task(queue=queue)
    def here() -> str:
        return "here"

    @kit.task(queue=other)
    def there() -> str:
        return "there"

    here.enqueue()
    left = there.enqueue()
    got = testing.drain(kit, [queue])
    assert list(got.results.values()) == ["here"]
    assert [j.id for j in testing.enqueued(kit, there)] == [left]


def test_limit_bounds_the_runs(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def again(n: int) -> None:
        again.enqueue(n + 1)

    again.enqueue(0)
    got = testing.drain(kit, limit=5)
    assert got.completed == 5
    assert len(testing.enqueued(kit, again)) == 1
    with pytest.raises(ValueError):
        testing.drain(kit, limit=0)


def test_chain_callbacks_and_kept_results(kit: App, queue: str) -> None:
    called: list[str] = []

    def done(settled: Any) -> None:
        called.append(settled.outcome)

    @kit.task(queue=queue)
    def add(x: int, y: int) -> int:
        return x + y

    @kit.task(queue=queue, keep_result=60, on_success=done)
    def double(x: int) -> int:
        return x * 2

    last = chain(add.s(1, 2), double.s()).enqueue()
    got = testing.drain(kit)
    assert got.completed == 2 and got.results[last] == 6
    assert kit.job(last).result == 6
    assert called == ["completed"]


def test_expired_jobs_are_counted(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def late() -> None:
        raise AssertionError("an expired job never runs")

    late.options(expires=dt.timedelta(minutes=5)).enqueue_in(dt.timedelta(minutes=10))
    testing.advance(kit, dt.timedelta(minutes=11), queues=[queue])
    got = testing.drain(kit)
    assert (got.expired, got.ran) == (1, 0)


def test_adrain_on_the_tests_loop(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    async def echo(x: str) -> str:
        await asyncio.sleep(0)
        return x

    async def main() -> testing.Drained:
        await echo.aenqueue("hi")
        return await testing.adrain(kit)

    got = asyncio.run(main())
    assert list(got.results.values()) == ["hi"]


def test_sync_drain_inside_a_running_loop(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def echo(x: str) -> str:
        return x

    async def main() -> testing.Drained:
        echo.enqueue("from a loop")
        return testing.drain(kit)

    got = asyncio.run(main())
    assert list(got.results.values()) == ["from a loop"]
    assert jobs.counts(kit.connector(), queue)["pending"] == 0
