"""``testing.drain``'s rounds: one ``@standing`` read decides each round, the legs run only
when they have work, one queue's acks claim its next job; what it runs stays the worker's."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from echomq import testing
from echomq.connectors.aconnector import AsyncConnector
from echomq.tasks.app import App
from echomq.verbs import jobs, testbed


def counting(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The steps the async connectors execute from now on (a drain's round trips: one
    step each, a lone script call or a pipelined batch)."""
    steps: list[Any] = []
    execute = AsyncConnector.execute

    async def counted(self: AsyncConnector, step: Any) -> Any:
        steps.append(step)
        return await execute(self, step)

    monkeypatch.setattr(AsyncConnector, "execute", counted)
    return steps


def test_one_job_is_four_round_trips(kit: App, queue: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    @kit.task(queue=queue)
    def add(a: int, b: int) -> int:
        return a + b

    testing.drain(kit)  # the kit loop's connector is made (and its scripts loaded) here
    jid = add.enqueue(1, 2)
    steps = counting(monkeypatch)
    assert testing.drain(kit).results == {jid: 3}
    # the standing read, the claim, the ack with the next claim (none), the standing read
    # (a beat's legs, four scripts each, never ran: nothing was due)
    assert len(steps) == 4, steps


def test_each_queues_acks_claim_its_next_job(kit: App, queue: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    names = [queue + s for s in "abc"]
    tasks = [kit.task(lambda n: n, queue=q, name="echo_" + q) for q in names]
    testing.drain(kit)
    for t in tasks:
        for n in range(4):
            t.enqueue(n)
    steps = counting(monkeypatch)
    assert testing.drain(kit).completed == 12
    # two standing reads, a claim per queue (side by side), then an ack per job, each
    # with the queue's next claim: no round between the jobs
    assert len(steps) == 2 + 3 + 12, steps


def test_standing_reads_what_a_round_would_do(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def noop() -> None:
        return None

    conn = kit.connector()
    empty = testbed.standing(conn, [queue])[queue]
    assert empty == testbed.Standing(False, False, False, 0)
    noop.enqueue_in(dt.timedelta(hours=1))
    assert testbed.standing(conn, [queue])[queue] == testbed.Standing(False, True, False, 0)
    testing.advance(kit, dt.timedelta(hours=2), queues=[queue])
    assert testbed.standing(conn, [queue])[queue].legs  # due now: a promote has work
    noop.enqueue()
    other = "o" + queue
    both = testbed.standing(conn, [queue, other])  # several queues: one pipelined read
    assert both[queue].claimable and not both[other].claimable


def test_a_lapsed_lease_is_reaped_and_run(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def work() -> str:
        return "done"

    jid = work.enqueue()
    conn = kit.connector()
    claimed = jobs.claim(conn, queue, 1)  # a worker that died with the job in hand
    assert claimed is not None and claimed.id == jid
    time.sleep(0.01)  # its 1 ms lease has lapsed (SERVER clock)
    standing = testbed.standing(conn, [queue])[queue]
    assert standing.legs and not standing.claimable
    got = testing.drain(kit)  # the reap leg ran, though nothing was claimable before it
    assert got.results == {jid: "done"} and got.completed == 1


def test_the_limit_holds_across_queues(kit: App, queue: str) -> None:
    other = "o" + queue

    @kit.task(queue=queue)
    def ping(n: int) -> None:
        pong.enqueue(n + 1)

    @kit.task(queue=other)
    def pong(n: int) -> None:
        ping.enqueue(n + 1)

    ping.enqueue(0)
    pong.enqueue(0)
    got = testing.drain(kit, limit=7)
    assert got.completed == 7
    assert len(testing.enqueued(kit, ping)) + len(testing.enqueued(kit, pong)) == 2


def test_a_chained_queue_stops_at_the_limit(kit: App, queue: str) -> None:
    ran: list[int] = []

    @kit.task(queue=queue)
    def step(n: int) -> None:
        ran.append(n)
        step.enqueue(n + 1)

    step.enqueue(0)
    assert testing.drain(kit, limit=3).completed == 3
    assert ran == [0, 1, 2]
    assert [j.args for j in testing.enqueued(kit, step)] == [[3]]
    assert testing.drain(kit, limit=2).completed == 2 and ran[-1] == 4


def test_a_partitioned_queue_is_drained_whole(kit: App, queue: str) -> None:
    @kit.task(queue=queue, partitions=4)
    def part(n: int) -> int:
        return n

    for size in (12, 1, 5, 2, 7, 3, 9, 4):  # each drain ends with the spread's turn elsewhere
        ids = [part.enqueue(n) for n in range(size)]
        got = testing.drain(kit)
        assert got.completed == size and sorted(got.results) == sorted(ids)
    assert testing.drain(kit).ran == 0


@pytest.mark.parametrize("limit", [1, 2, 4, 5])
def test_the_limit_is_exact_with_more_queues_than_runs_left(kit: App, queue: str,
                                                             limit: int) -> None:
    tasks = [kit.task(lambda n: n, queue=queue + s, name="echo_" + queue + s) for s in "abc"]
    for t in tasks:
        for n in range(2):
            t.enqueue(n)
    assert testing.drain(kit, limit=limit).completed == limit
    assert testing.drain(kit).completed == 6 - limit
