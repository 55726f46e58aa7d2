"""``testing.drain`` runs a batch as a worker does: its members, then its callbacks (jobs the
settlement enqueued, drained in turn), and a chunk task's jobs through its handler."""

from __future__ import annotations

from echomq import testing
from echomq.verbs.batches import BatchInfo


def test_drain_runs_a_batch_and_its_callbacks(echomq_app) -> None:
    seen: list[tuple[str, int]] = []

    @echomq_app.task(queue="kit-batch")
    def send(n: int) -> int:
        return n

    @echomq_app.task(queue="kit-batch-cb")
    def done(tag: str, info: dict) -> None:
        seen.append((tag, info["completed"]))

    with echomq_app.batch(on_complete=done.s("complete"), on_success=done.s("success")) as b:
        b.add(send.s(1), send.s(2), send.s(3))
    drained = testing.drain(echomq_app)
    assert drained.completed == 5  # three members, two callbacks
    assert sorted(seen) == [("complete", 3), ("success", 3)]
    assert echomq_app.batch_info(b.id) == BatchInfo(3, 0, 3, 0, True)


def test_drain_runs_a_chunk_task(echomq_app) -> None:
    calls: list[list[int]] = []

    @echomq_app.task(queue="kit-chunk", chunk=10, chunk_wait=0.05)
    def index(items: list) -> None:
        calls.append(sorted(job.args[0] for job in items))

    index.enqueue_many([(i,) for i in range(4)])
    drained = testing.drain(echomq_app)
    assert drained.completed == 4
    assert sorted(n for call in calls for n in call) == [0, 1, 2, 3]
