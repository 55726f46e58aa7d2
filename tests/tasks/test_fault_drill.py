"""The fault drill's findings (issue 37), each through the project's own TCP fault proxy
(``tests.support.faults``) between the client and the test server:

- ``App(timeout=0.5)`` keeps every blocking wait correct: ``app.result`` times out on its
  own deadline, a healthy worker logs no outage and a stop request is served at once;
- an admission whose reply is lost is retried with its minted id (``retry_for``) and
  admitted exactly once, sync and async, bulk and flows too; without ``retry_for`` the
  caller sees the error though the job was admitted (the ambiguity the retry resolves);
- connections reset every few ms: no error reaches the producer, every job once;
- a worker's recovery line is logged at the first answer after a blackhole, timed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import App, errors
from echomq.tasks.canvas import chain
from echomq.verbs import jobs, workers
from tests.support.faults import FaultProxy
from tests.support.polling import wait_for
from tests.support.workers import serving


@pytest.fixture
def proxy(server: Any) -> Iterator[FaultProxy]:
    with FaultProxy.to(server.url) as px:
        yield px


def _admitted(app: App, queue: str) -> int:
    """How many admissions the queue's own counter recorded (a duplicate records none), read
    on a connector of its own: the app's pooled connection may be one the proxy just cut,
    and a read is not retried (only admissions are)."""
    from echomq import Connector

    conn = Connector.connect(app.url)
    try:
        return jobs.stats(conn, queue)["enqueued"]
    finally:
        conn.close()


@contextlib.contextmanager
def _replies_lost_for(proxy: FaultProxy, seconds: float) -> Iterator[None]:
    """Replies swallowed from now for ``seconds`` (commands still reach the server)."""
    proxy.drop_replies()
    timer = threading.Timer(seconds, proxy.heal)
    timer.start()
    try:
        yield
    finally:
        timer.join()


@contextlib.contextmanager
def _producer(url: str, queue: str, **options: Any) -> Iterator[tuple[App, Any]]:
    """``App(url, **options)`` with one plain task on ``queue``, closed at the end."""
    app = App(url, **options)
    try:
        @app.task(queue=queue)
        def work(x): ...

        yield app, work
    finally:
        app.close()


# -- timeout: any value works ---------------------------------------------------------


def test_a_half_second_timeout_waits_for_a_result_on_its_own_deadline(proxy, queue):
    app = App(proxy.url(), timeout=0.5)
    try:
        @app.task(queue=queue, keep_result=60)
        def kept(x): ...

        @app.task(queue=queue)
        def plain(x): ...

        proxy.latency(0.02)
        for jid in (kept.enqueue(1), plain.enqueue(2)):
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):  # not a WireError after 0.5 s
                app.result(jid, timeout=2)
            assert 2 <= time.monotonic() - t0 < 4
        jid = kept.enqueue(3)

        async def main() -> float:
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                await app.aresult(jid, timeout=1.5)
            return time.monotonic() - t0

        assert 1.5 <= asyncio.run(main()) < 3.5
    finally:
        app.close()


def test_a_half_second_timeout_keeps_a_worker_healthy_and_stoppable(proxy, queue, caplog):
    caplog.set_level(logging.INFO, logger="echomq.worker")
    app = App(proxy.url(), timeout=0.5)
    try:
        @app.task(queue=queue)
        def noop(x): ...

        proxy.latency(0.01)
        with serving(app, [queue], heartbeat_ms=600) as worker:
            noop.enqueue(1)
            time.sleep(2.5)  # idle blocking waits, control waits, heartbeats
            assert not [r for r in caplog.records if "degraded" in r.getMessage()]
            assert worker.presence is not None
            t0 = time.monotonic()
            assert workers.request(app.connector(), worker.presence.id, "stop")
            wait_for(lambda: not worker.presence or worker.presence.state != "running"
                     or not workers.live(app.connector()), 5, "the worker stops")
            # the figure was 4.6-4.8 s: the control wait outlived the socket
            assert time.monotonic() - t0 < 2.0
        assert _admitted(app, queue) == 1
    finally:
        app.close()


def test_timeout_is_checked():
    with pytest.raises(ValueError):
        App("valkey://localhost:1", timeout=0)
    with pytest.raises(TypeError):
        App("valkey://localhost:1", timeout="5")
    with pytest.raises(ValueError):
        App("valkey://localhost:1", retry_for=-1)


# -- retry_for: ambiguous admissions, admitted once ------------------------------------


def test_without_retry_for_a_lost_reply_reaches_the_caller_though_the_job_was_admitted(
        proxy, queue):
    with _producer(proxy.url(), queue, timeout=0.3, retry_for=None) as (app, work):
        work.enqueue(0)
        with _replies_lost_for(proxy, 1.0), pytest.raises(errors.WireError):
            work.enqueue(1)
        wait_for(lambda: _admitted(app, queue) == 2, 5, "the lost call's job is there")


def test_a_lost_reply_is_retried_with_its_id_and_admitted_once(proxy, queue):
    app = App(proxy.url(), timeout=0.3)  # retry_for: the default 10 s
    try:
        @app.task(queue=queue)
        def work(x): ...

        @app.task(queue=queue, keep_result=60)
        def flat(x): ...

        first = work.enqueue(0)
        with _replies_lost_for(proxy, 1.0):
            jid = work.enqueue(1)
        assert jid != first and app.job(jid).state == "pending"
        with _replies_lost_for(proxy, 1.0):
            # a retry finds the unique key owned by its own first try: its id comes back
            fid = flat.options(unique="k", unique_for=60).enqueue(2)
        assert app.job(fid).state == "pending"
        with _replies_lost_for(proxy, 1.0):
            ids = work.enqueue_many([(i,) for i in range(50)])
        assert len(set(ids)) == 50
        with _replies_lost_for(proxy, 1.0):
            root = chain(work.s(1), work.si(2)).enqueue()  # .si: work takes one argument
        assert app.job(root) is not None
        # 1 + 1 + 1 + 50 jobs, and the chain's (its first link and the held rest)
        assert _admitted(app, queue) >= 53
        counts = jobs.counts(app.connector(), queue)
        assert counts["pending"] == 54, counts  # each exactly once; the chain's tail waits
    finally:
        app.close()


def test_a_lost_reply_is_retried_on_the_async_path_too(proxy, queue):
    with _producer(proxy.url(), queue, timeout=0.3) as (app, work):
        async def main() -> list[str]:
            got = [await work.aenqueue(0)]  # connector made, queue noted: the fast path
            with _replies_lost_for(proxy, 1.0):
                got.append(await work.aenqueue(1))
            with _replies_lost_for(proxy, 1.0):
                got += await work.aenqueue_many([(i,) for i in range(20)])
            await app.aclose()
            return got

        got = asyncio.run(main())
        assert len(set(got)) == 22
        assert _admitted(app, queue) == 22


def test_connections_reset_every_few_ms_no_error_reaches_the_producer(proxy, queue):
    with _producer(proxy.url(), queue, timeout=1.0) as (app, work):
        work.enqueue(-1)
        stop = threading.Event()
        resets = [0]

        def cutter() -> None:
            while not stop.wait(0.02):
                proxy.reset()
                resets[0] += 1

        thread = threading.Thread(target=cutter, daemon=True)
        thread.start()
        try:
            got = [work.enqueue(i) for i in range(300)]
        finally:
            stop.set()
            thread.join()
        assert resets[0] >= 5
        assert len(set(got)) == 300
        assert _admitted(app, queue) == 301


def test_a_refusal_is_not_retried(proxy, queue):
    with _producer(proxy.url(), queue, max_payload_bytes=100) as (_, work):
        t0 = time.monotonic()
        with pytest.raises(errors.PayloadTooLarge):
            work.enqueue("x" * 1_000)
        assert time.monotonic() - t0 < 1


# -- the recovery line ------------------------------------------------------------------


def test_the_recovery_line_is_logged_at_the_first_answer_and_timed_to_it(proxy, queue,
                                                                         caplog):
    caplog.set_level(logging.INFO, logger="echomq.worker")
    app = App(proxy.url(), timeout=0.5)
    try:
        @app.task(queue=queue)
        def noop(x): ...

        with serving(app, [queue], heartbeat_ms=600):
            time.sleep(0.5)
            proxy.blackhole()
            wait_for(lambda: any("degraded" in r.getMessage() for r in caplog.records), 10,
                     "the outage is seen")
            time.sleep(2.0)
            proxy.reset()  # the swallowed connections die with the blackhole's end
            proxy.heal()
            healed = proxy.switched_at
            wait_for(lambda: any("recovered" in r.getMessage() for r in caplog.records),
                     15, "the recovery line")
            logged = time.monotonic()
        line = next(r.getMessage() for r in caplog.records if "recovered" in r.getMessage())
        reported = float(re.search(r"after ([\d.]+) s", line).group(1))  # type: ignore[union-attr]
        # the outage's true span is about 2.5 s (the first failure comes a socket timeout
        # after the cut); the issue saw 26 s reported for 20 s, logged 11 s after the return
        assert reported < 2.5 + 0.5 + 2.0, line
        assert logged - healed < 3.0, (logged - healed, line)
    finally:
        app.close()


# -- a lost claim reply -----------------------------------------------------------------


def test_a_claim_sent_again_with_its_id_answers_the_same_jobs(run, queue):
    from echomq.core import ids

    sent = [ids.mint() for _ in range(3)]
    for jid in sent:
        run(jobs.enqueue, queue, jid, b"{}")
    first = run(jobs.claim_many, queue, 30_000, 2, "c1")
    again = run(jobs.claim_many, queue, 30_000, 2, "c1")  # its reply was lost: sent again
    assert [c.id for c in first] == sent[:2] and again == first
    run(jobs.ack, queue, first[0].id, first[0].token)  # only what it still holds returns
    assert run(jobs.claim_many, queue, 30_000, 2, "c1") == first[1:]
    assert [c.id for c in run(jobs.claim_many, queue, 30_000, 2, "c2")] == sent[2:]
    assert run(jobs.claim_many, queue, 30_000, 2) == []


def test_a_lost_claim_reply_does_not_strand_its_job_for_a_lease(proxy, server, queue):
    # the issue: 1-4 jobs leased to no one for a full lease (30 s) after every cut; the
    # claim loop sends a failed claim again with its id (runtime.claimloop)
    from echomq import Connector
    from echomq.core import ids

    jid = ids.mint()
    with Connector.connect(server.url) as direct, \
            Connector.connect(proxy.url("socket_timeout=0.3")) as worker:
        jobs.enqueue(direct, queue, jid, b"{}")
        worker.ping()  # the connection is up: the claim itself reaches the server
        proxy.drop_replies()
        with pytest.raises(errors.WireError):
            jobs.claim_many(worker, queue, 30_000, 4, "claim-1")
        assert jobs.counts(direct, queue)["active"] == 1  # leased, the reply lost
        proxy.heal()
        again = jobs.claim_many(worker, queue, 30_000, 4, "claim-1")
        assert [(c.id, c.token) for c in again] == [(jid, 1)]  # at once, not in 30 s
        jobs.ack(worker, queue, jid, 1)
        assert jobs.counts(direct, queue)["active"] == 0
