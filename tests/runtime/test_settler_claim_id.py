"""The settler's ack+claim round trip carries a claim id (as the claim loop's claims do), so
a lost reply does not strand the jobs its claim leased for a lease: through the tests' fault
proxy, which drops the replies while the commands still reach the server."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from echomq import AsyncConnector, Connector, errors
from echomq.core import ids
from echomq.runtime.consumer import Consumer
from echomq.verbs import jobs
from tests.support.faults import FaultProxy


@pytest.mark.parametrize("wire", [4, 6], ids=["scripts", "native"])
def test_an_ack_and_claim_sent_again_with_its_id_answers_the_same_jobs(
        proxy: FaultProxy, server: Any, queue: str, wire: int) -> None:
    sent = [ids.mint() for _ in range(5)]
    with Connector.connect(server.url) as direct, \
            Connector.connect(proxy.url("socket_timeout=0.3"), wire=wire) as worker:
        for jid in sent:
            jobs.enqueue(direct, queue, jid, b"{}")
        [first] = jobs.claim_many(worker, queue, 30_000, 1)
        # a first round trip loads what the connector sends (its scripts): then only the
        # ack+claim itself goes out while the replies are dropped
        _, [held] = jobs.ack_and_claim(worker, queue, [(first.id, first.token)], 30_000, 1,
                                       False, "s-0")
        proxy.drop_replies()
        with pytest.raises(errors.WireError):  # applied, its reply lost
            jobs.ack_and_claim(worker, queue, [(held.id, held.token)], 30_000, 2, False, "s-1")
        assert jobs.counts(direct, queue)["active"] == 2  # leased to no one
        proxy.heal()
        refusals, again = jobs.ack_and_claim(worker, queue, [(held.id, held.token)], 30_000, 2,
                                             False, "s-1")
        assert [c.id for c in again] == sent[2:4]  # the same jobs, at once
        assert isinstance(refusals[0], errors.StaleError)  # the first try's ack landed
        for c in again:
            jobs.ack(worker, queue, c.id, c.token, False)
        assert jobs.counts(direct, queue)["active"] == 0



@pytest.mark.parametrize("wire", [4, 6], ids=["scripts", "native"])
def test_a_partitioned_ack_and_claim_sent_again_with_its_id_answers_the_same_jobs(
        proxy: FaultProxy, server: Any, queue: str, wire: int) -> None:
    """The partitions' ack+claim (one round trip over several queues) carries one claim
    id for every queue's claim: a lost reply's jobs come back on each queue."""
    qs = [f"{queue}-a", f"{queue}-b"]
    sent = {q: [ids.mint() for _ in range(4)] for q in qs}
    with Connector.connect(server.url) as direct, \
            Connector.connect(proxy.url("socket_timeout=0.3"), wire=wire) as worker:
        for q in qs:
            for jid in sent[q]:
                jobs.enqueue(direct, q, jid, b"{}")
        jobs.ack_and_claim_queues(worker, {}, {q: 1 for q in qs}, 30_000, False, "p-0")
        proxy.drop_replies()
        with pytest.raises(errors.WireError):  # applied, its reply lost
            jobs.ack_and_claim_queues(worker, {}, {q: 2 for q in qs}, 30_000, False, "p-1")
        proxy.heal()
        _, again = jobs.ack_and_claim_queues(worker, {}, {q: 2 for q in qs}, 30_000, False,
                                             "p-1")
        assert {q: [c.id for c in again[q]] for q in qs} == {q: sent[q][1:3] for q in qs}
        assert all(jobs.counts(direct, q)["active"] == 3 for q in qs)  # nothing stranded

def test_a_consumer_whose_ack_and_claim_reply_is_lost_runs_its_jobs_at_once(
        proxy: FaultProxy, server: Any, queue: str) -> None:
    """Replies dropped for 1 s from inside a handler (its ack+claim is what goes out next);
    every job runs well inside the 30 s lease the stranded claims would have waited out."""
    n = 30
    sent = [ids.mint() for _ in range(n)]
    done: dict[str, float] = {}
    healed: list[float] = []

    def heal() -> None:
        proxy.heal()
        healed.append(time.monotonic())

    async def handler(job: Any) -> None:
        if job.id == sent[4]:
            proxy.drop_replies()
            threading.Timer(1.0, heal).start()
        done.setdefault(job.id, time.monotonic())

    async def main() -> None:
        stop = asyncio.Event()
        async with await AsyncConnector.connect(proxy.url("socket_timeout=0.3")) as conn:
            consumer = Consumer(conn, queue, handler, concurrency=2, lease_ms=30_000)
            task = asyncio.ensure_future(consumer.serve(stop, 5))
            deadline = time.monotonic() + 20
            while len(done) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            stop.set()
            await task

    with Connector.connect(server.url) as direct:
        for jid in sent:
            jobs.enqueue(direct, queue, jid, b"{}")
        asyncio.run(main())
        assert healed, "the replies were never dropped"
        assert len(done) == n, f"{n - len(done)} jobs stranded"
        # measured from the heal: a stranded claim would have waited out its 30 s lease
        assert max(done.values()) - healed[0] < 10.0
        assert jobs.counts(direct, queue)["active"] == 0
