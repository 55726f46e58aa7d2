"""Issue 37's last hole, through the tests' fault proxy: a retried admission (``retry_for``)
that arrives after its job already ran and its row was deleted at the ack.

The exact race: the producer's enqueue reaches the server and its reply is lost; while the
producer waits to retry, a worker claims the job, runs it and acks it with its row deleted
(the default retention); then the network heals and the retry of the same id arrives. The
ack left the id on the queue's seen mark, so the retry writes nothing and answers
"duplicate": the caller gets its id, and the job ran once (before the mark, the retry
admitted it a second time)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from echomq import App, Connector
from echomq.verbs import jobs
from tests.support.faults import FaultProxy
from tests.support.polling import wait_for


@pytest.mark.parametrize("wire", [4, 6], ids=["scripts", "native"])
def test_a_retry_after_the_job_ran_and_its_row_was_deleted_admits_nothing(
        proxy: FaultProxy, server: Any, queue: str, wire: int) -> None:
    # the producer and the worker on one wire: the admission and the ack are the scripts
    # (4) or the EMQ module's commands (6); retry_for: the default 10 s
    app = App(proxy.url(), timeout=0.3, wire=wire)
    got: list[str] = []
    try:
        @app.task(queue=queue)
        def charge(x): ...

        charge.enqueue(0)  # connected, the queue noted: the next call is one admission
        with Connector.connect(server.url, wire=wire) as worker:
            first = jobs.claim(worker, queue, 30_000)
            assert first is not None
            jobs.ack(worker, queue, first.id, first.token, False)
            proxy.drop_replies()
            producer = threading.Thread(target=lambda: got.append(charge.enqueue(1)))
            producer.start()
            # the admission landed (its reply did not): the worker runs it and deletes it
            wait_for(lambda: jobs.counts(worker, queue)["pending"] == 1, 5, "admitted")
            held = jobs.claim(worker, queue, 30_000)
            assert held is not None
            jobs.ack(worker, queue, held.id, held.token, False)
            assert jobs.get(worker, queue, held.id) is None
            proxy.heal()  # the retry (same id) reaches the server now
            producer.join(15)
            assert not producer.is_alive()
            assert got == [held.id]  # the caller gets its id: a duplicate is success
            counts = jobs.counts(worker, queue)
            assert counts["pending"] == counts["scheduled"] == counts["active"] == 0, counts
            assert jobs.get(worker, queue, held.id) is None  # not admitted again
            assert jobs.stats(worker, queue)["enqueued"] == 2  # the two first tries only
    finally:
        app.close()
