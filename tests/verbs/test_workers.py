"""The live worker registry's verbs (``verbs.workers``) on both connectors and wires, on a
single server and a cluster: a registration lives two heartbeat periods past its last
renewal on the SERVER clock, a heartbeat carries the busy list and the state, a clean
exit removes every key, a request reaches a live worker's control list only; and the
declarations, the purge, the lag and the last minute's counts the operating commands
read."""

from __future__ import annotations

import time
import uuid

import pytest

from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import backlog, declarations, jobs, metrics, purge, registry, workers
from tests.support.clients import server_ms
from tests.support.polling import wait_for


def _reg(heartbeat_ms: int = 60_000, **over) -> workers.Registration:
    wid = over.pop("id", f"test:{uuid.uuid4().hex[:8]}")
    base = dict(id=wid, host="h", pid=42, app="mod:app", queues=("a", "b"), concurrency=3,
                wire=4, version="9.9", heartbeat_ms=heartbeat_ms,
                tasks={"a": ["t1", "t2"], "b": []})
    return workers.Registration(**{**base, **over})


def _mine(run, wid: str) -> workers.WorkerRecord | None:
    return next((r for r in run(workers.live) if r.id == wid), None)


@pytest.mark.topologies
def test_register_heartbeat_live_and_unregister(run, raw):
    reg = _reg()
    at = run(workers.register, reg)
    assert abs(at - server_ms(raw)) < 5_000
    rec = _mine(run, reg.id)
    assert rec is not None
    assert (rec.host, rec.pid, rec.app, rec.queues, rec.concurrency, rec.version) == (
        "h", 42, "mod:app", ["a", "b"], 3, "9.9")
    assert rec.tasks == {"a": ["t1", "t2"], "b": []} and rec.busy == []
    assert rec.started_ms == rec.seen_ms == at and rec.state == "running"
    assert rec.declares("a", "t1") and not rec.declares("b", "t1") and rec.serves("a")
    # the hash lives two heartbeat periods on the SERVER clock
    ttl = raw.pttl(keyspace.worker_key(reg.id))
    assert 2 * reg.heartbeat_ms - 5_000 < ttl <= 2 * reg.heartbeat_ms

    busy = [workers.Running(ids.mint(), "a", "t1", at, 2)]
    renewed, now = run(workers.heartbeat, reg.id, reg.heartbeat_ms, busy, "quiet")
    assert renewed and now >= at
    rec = _mine(run, reg.id)
    assert rec.busy == busy and rec.state == "quiet" and rec.seen_ms == now
    assert not rec.serves("a")
    # a heartbeat without a busy list leaves the last one
    assert run(workers.heartbeat, reg.id, reg.heartbeat_ms)[0]
    assert _mine(run, reg.id).busy == busy

    assert run(workers.unregister, reg.id) is True
    assert _mine(run, reg.id) is None
    assert not raw.exists(keyspace.worker_key(reg.id), keyspace.worker_key(reg.id, "busy"))
    assert raw.zscore(workers.INDEX, reg.id) is None
    assert run(workers.unregister, reg.id) is False


@pytest.mark.topologies
def test_an_unrenewed_registration_drops_out_within_two_periods(run, raw):
    reg = _reg(heartbeat_ms=200)
    run(workers.register, reg)
    assert _mine(run, reg.id) is not None
    gone = wait_for(lambda: _mine(run, reg.id) is None and time.monotonic(), 2,
                    "registration expiry")
    assert gone
    # the read swept the index; a late heartbeat says so and writes nothing
    assert raw.zscore(workers.INDEX, reg.id) is None
    renewed, _ = run(workers.heartbeat, reg.id, 200)
    assert not renewed and not raw.exists(keyspace.worker_key(reg.id))
    # registering again keeps the first start when the worker carries it
    at = run(workers.register, _reg(heartbeat_ms=200, id=reg.id, started_ms=1234))
    assert _mine(run, reg.id).started_ms == 1234 and at > 1234
    run(workers.unregister, reg.id)


@pytest.mark.topologies
def test_a_read_without_sweep_sees_the_same_and_writes_nothing(run, raw):
    reg, short = _reg(), _reg(heartbeat_ms=200)
    run(workers.register, reg)
    run(workers.register, short)
    busy = [workers.Running(ids.mint(), "a", "t1", 1, 1)]
    run(workers.heartbeat, reg.id, reg.heartbeat_ms, busy)
    try:
        mine = {r.id: r for r in run(workers.live, sweep=False)}
        swept = {r.id: r for r in run(workers.live)}
        assert mine[reg.id].busy == busy
        assert {i: (r.queues, r.busy, r.state) for i, r in mine.items() if i in swept} == {
            i: (r.queues, r.busy, r.state) for i, r in swept.items() if i in mine}
        assert [r.id for r in run(workers.live, queue="b", sweep=False)].count(reg.id) == 1
        # an expired registration is left out, and left in the index (no write)
        wait_for(lambda: short.id not in {r.id for r in run(workers.live, sweep=False)}, 2,
                 "registration expiry")
        assert raw.zscore(workers.INDEX, short.id) is not None
    finally:
        run(workers.unregister, reg.id)
        run(workers.unregister, short.id)


@pytest.mark.topologies
def test_requests_reach_live_workers_only(run, raw):
    a, b = _reg(), _reg()
    run(workers.register, a)
    run(workers.register, b)
    try:
        assert run(workers.request, a.id, "quiet") == [a.id]
        assert run(workers.next_request, a.id, 0.1) == "quiet"
        assert run(workers.next_request, a.id, 0.05) is None
        assert _mine(run, a.id).requested == "quiet"
        asked = run(workers.request, "*", "stop")
        assert {a.id, b.id} <= set(asked)
        assert run(workers.next_request, b.id, 0.1) == "stop"
        # no such worker: nothing written
        ghost = "test:ghost-" + uuid.uuid4().hex[:6]
        assert run(workers.request, ghost, "stop") == []
        assert not raw.exists(workers.control_key(ghost))
    finally:
        run(workers.unregister, a.id)
        run(workers.unregister, b.id)
    assert not raw.exists(workers.control_key(b.id))


def test_bad_arguments_are_refused_before_any_io(run):
    with pytest.raises(ValueError):
        run(workers.request, "w1", "pause")
    with pytest.raises(ValueError):
        run(workers.request, "bad{id}", "quiet")
    with pytest.raises(ValueError):
        run(workers.heartbeat, "w1", 1000, None, "asleep")
    with pytest.raises(ValueError):
        run(workers.register, _reg(heartbeat_ms=0))
    with pytest.raises(ValueError):
        run(workers.next_request, "w1", 0)
    assert workers.owners([], "a", "t") == []


def test_a_partitioned_queue_is_served_by_any_of_its_partitions(run):
    reg = _reg(queues=("mail#0", "mail#1"))
    run(workers.register, reg)
    try:
        rec = _mine(run, reg.id)
        assert rec.serves("mail") and rec.serves("mail#1") and not rec.serves("mail#2")
        assert not rec.serves("mai")
    finally:
        run(workers.unregister, reg.id)


def test_busy_snapshot_round_trips():
    busy = [workers.Running("JOB1", "q", None, 5, 1), workers.Running("JOB2", "q", "t", 6, 3)]
    assert workers.busy_of(workers.busy_text(busy)) == busy
    assert workers.busy_of(b"not json") == [] and workers.busy_of("") == []


@pytest.mark.topologies
def test_declarations_replace_per_task(run, queue):
    assert run(declarations.declared, queue) == {}
    assert run(declarations.declare, queue, {"t1": {"max_attempts": 3}, "t2": {}}) == 2
    assert run(declarations.declare, queue, {"t1": {"max_attempts": 5}}) == 0
    assert run(declarations.declared, queue) == {"t1": {"max_attempts": 5}, "t2": {}}
    with pytest.raises(ValueError):
        run(declarations.declare, queue, {})


@pytest.mark.topologies
def test_purge_empties_one_state_and_leaves_the_others(run, conn, raw, queue):
    flat = [ids.mint() for _ in range(7)]
    for j in flat:
        jobs.enqueue(conn, queue, j, b"p")
    grouped = ids.mint()
    jobs.enqueue(conn, queue, grouped, b"g", group="acme")
    later = ids.mint()
    jobs.enqueue_in(conn, queue, later, b"s", 60_000)
    running = jobs.claim(conn, queue, 60_000)  # the head: a running job is not purged
    uniq = jobs.admit(conn, queue, ids.mint(), b"u", mode="now", value=0, unique="k1")
    # 7 flat + the lane's + the unique one, less the one claimed (running: not purged)
    assert run(purge.purge, queue, "pending", 3) == 8
    counts = jobs.counts(conn, queue)
    assert (counts["pending"], counts["scheduled"], counts["active"]) == (0, 1, 1)
    assert raw.zcard(keyspace.lane_key(queue, "acme")) == 0
    assert not raw.exists(keyspace.job_key(queue, uniq.id))
    assert running.id == grouped or not raw.exists(keyspace.job_key(queue, grouped))
    # its unique key went with it: the key admits again
    again = jobs.admit(conn, queue, ids.mint(), b"u", mode="now", value=0, unique="k1")
    assert again.outcome == "enqueued"
    assert run(purge.purge, queue, "scheduled") == 1
    assert raw.exists(keyspace.job_key(queue, running.id))
    jobs.retry(conn, queue, running.id, running.token, 0, 1, "boom")  # dead now
    raw.zadd(keyspace.queue_key(queue, "dead"), {"JOBGHOST": 1})  # a ghost id, no row
    assert run(purge.purge, queue, "dead") == 1
    assert raw.zcard(keyspace.queue_key(queue, "dead")) == 0
    with pytest.raises(ValueError):
        run(purge.purge, queue, "active")


@pytest.mark.topologies
def test_lag_reads_the_oldest_due_job(run, conn, raw, queue):
    assert run(backlog.lag, queue) is None
    old = ids.mint_at(server_ms(raw) - 5_000)
    jobs.enqueue(conn, queue, old, b"x")
    assert 4_500 <= run(backlog.lag, queue) <= 15_000
    jobs.claim(conn, queue, 60_000)
    assert run(backlog.lag, queue) is None
    jobs.enqueue_at(conn, queue, ids.mint(), b"x", server_ms(raw) - 8_000)  # due, unpromoted
    assert 7_500 <= run(backlog.lag, queue) <= 20_000
    jobs.enqueue_at(conn, queue, ids.mint(), b"x", server_ms(raw) + 60_000)
    assert run(backlog.lag, queue) >= 7_500


@pytest.mark.topologies
def test_last_minute_reads_the_ring(run, queue):
    assert run(metrics.last_minute, queue) == (0.0, 0.0)
    run(metrics.observe, queue, [0.01] * 5, completed=4, failed=1)
    done, failed = run(metrics.last_minute, queue)
    assert (done, failed) == (4.0, 1.0)


def test_registry_index_is_no_queue(conn, queue):
    reg = _reg()
    workers.register(conn, reg)
    try:
        jobs.enqueue(conn, queue, ids.mint(), encode("t", []))
        found = registry.queues(conn, scan=True)
        assert queue in found and keyspace.WORKERS_TAG not in found
    finally:
        workers.unregister(conn, reg.id)
