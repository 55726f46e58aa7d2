"""The Consumer's beat on a real Valkey: ack, retry on a policy's curve, dead-letter, delay,
lease checkpoints, the blocking wake, and degraded mode across a server restart."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from echomq import AsyncConnector
from echomq.core import backoff, ids, keyspace
from echomq.embedded.launch import free_port
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.runtime.events import Event
from echomq.runtime.handler import Delay, Job, current_job
from echomq.runtime.metronome import Metronome
from echomq.verbs import jobs
from tests.support.clients import server_ms
from tests.support.polling import until


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


@contextlib.asynccontextmanager
async def served(*consumers: Consumer) -> AsyncIterator[None]:
    """The consumers serving until the block ends, then stopped and drained (what a drain
    left unfinished is on ``consumer.abandoned``)."""
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(c.serve(stop, grace_s=5)) for c in consumers]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


def consume(url: str, queue: str, done: Callable[[Consumer], bool], *,
            enqueue: Sequence[str] = (), timeout: float = 10.0, **options: Any) -> Consumer:
    """Enqueue the ids in ``enqueue`` (payload ``b"p"``), then serve ``Consumer(**options)``
    on its own connection until ``done(consumer)``; returned stopped and drained."""
    async def main() -> Consumer:
        async with await AsyncConnector.connect(url) as conn:
            for jid in enqueue:
                await jobs.enqueue(conn, queue, jid, b"p")
            consumer = Consumer(conn, queue, **options)
            async with served(consumer):
                await until(lambda: done(consumer), timeout=timeout)
        return consumer

    return asyncio.run(main())


@pytest.mark.topologies
def test_success_acks_and_deletes_the_row_by_default(url, raw, queue):
    seen: list[str] = []

    async def handler(job: Job) -> None:
        seen.append(job.id)

    want = [ids.mint() for _ in range(5)]
    consumer = consume(url, queue, lambda c: len(seen) == 5 and c.stats.completed == 5,
                       enqueue=want, handler=handler, concurrency=3)
    assert consumer.abandoned == []  # the drain left nothing unfinished
    assert sorted(seen) == sorted(want)
    for jid in seen:
        assert not raw.exists(keyspace.job_key(queue, jid))
    for s in ("pending", "active", "schedule", "completed", "dead"):
        assert raw.zcard(k(queue, s)) == 0


def test_sync_handler_runs_in_a_thread_with_current_job(url, queue):
    where: list[tuple[str, str | None, int]] = []

    def handler(job: Job) -> str:
        cur = current_job()
        where.append((threading.current_thread().name, cur.id if cur else None, job.attempts))
        return "ok"

    jid = ids.mint()
    consume(url, queue, lambda c: c.stats.completed == 1, enqueue=[jid], handler=handler)
    assert where == [(where[0][0], jid, 1)]
    assert where[0][0] != threading.main_thread().name


@pytest.mark.parametrize(
    ("policy", "max_attempts"),
    [(None, 3), (("exponential", 150, 500), 5)],
    ids=["fixed-retry_delay_ms", "exponential"],
)
@pytest.mark.slow
@pytest.mark.topologies
def test_poison_job_retried_on_the_policy_curve_then_dead(url, raw, queue, policy, max_attempts):
    """Every run-at the retry writes is the server's now at the failure plus exactly
    ``backoff.delay_ms(policy, attempts)`` (or the fixed ``retry_delay_ms``)."""
    fixed = 200
    failed_at: dict[int, int] = {}
    started_at: dict[int, int] = {}
    checked: list[tuple[int, int, int]] = []
    jid = ids.mint()

    def handler(job: Job) -> None:
        started_at[job.attempts] = server_ms(raw)
        failed_at[job.attempts] = server_ms(raw)
        raise ValueError(f"poison {job.attempts}")

    def on_event(ev: Event) -> None:
        if ev.kind == "retrying":
            after = server_ms(raw)
            score = raw.zscore(k(queue, "schedule"), jid)
            assert score is not None, "retried job not on the schedule set"
            expected = (backoff.delay_ms(policy, ev.attempts) if policy else fixed)
            assert ev.info["delay_ms"] == expected
            assert failed_at[ev.attempts] + expected <= score <= after + expected
            checked.append((ev.attempts, int(score), expected))

    consumer = consume(url, queue, lambda c: c.stats.dead == 1, enqueue=[jid], timeout=15,
                       handler=handler, max_attempts=max_attempts, retry_delay_ms=fixed,
                       backoff=policy, beat_ms=50, on_event=on_event)
    assert [a for a, _, _ in checked] == list(range(1, max_attempts))
    for attempts, score, _ in checked:  # the next run never starts before its run-at
        assert started_at[attempts + 1] >= score
    assert consumer.stats.retried == max_attempts - 1
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"dead"
    assert row[b"attempts"] == str(max_attempts).encode()
    assert row[b"failures"] == str(max_attempts).encode()
    assert row[b"error"] == f"ValueError: poison {max_attempts}".encode()
    assert raw.zscore(k(queue, "dead"), jid) is not None
    assert raw.zcard(k(queue, "schedule")) == 0


@pytest.mark.slow
@pytest.mark.topologies
def test_delay_returns_to_schedule_without_a_failure(url, raw, queue):
    runs: list[tuple[int, int]] = []
    jid = ids.mint()
    scored: list[int] = []

    async def handler(job: Job) -> str:
        runs.append((job.attempts, server_ms(raw)))
        if job.attempts == 1:
            raise Delay(300)
        if job.attempts == 2:
            job.delay(at=server_ms(raw) + 200)
        return "done"

    def on_event(ev: Event) -> None:
        if ev.kind == "delayed":
            row = raw.hgetall(keyspace.job_key(queue, jid))
            assert row[b"state"] == b"scheduled"
            assert b"failures" not in row and b"error" not in row
            scored.append(int(raw.zscore(k(queue, "schedule"), jid)))

    # max_attempts=1: a retry would dead-letter at once, a delay never does
    consumer = consume(url, queue, lambda c: c.stats.completed == 1, enqueue=[jid],
                       handler=handler, max_attempts=1, beat_ms=50, on_event=on_event)
    assert [a for a, _ in runs] == [1, 2, 3]
    assert consumer.stats.delayed == 2 and consumer.stats.dead == 0
    assert runs[0][1] + 300 <= scored[0] <= runs[1][1]
    assert runs[1][1] + 200 <= scored[1] <= runs[2][1]


def test_delay_refuses_bad_arguments():
    with pytest.raises(TypeError):
        Delay()
    with pytest.raises(TypeError):
        Delay(5, at=6)
    with pytest.raises(ValueError):
        Delay(-1)
    assert (Delay(at=123).mode, Delay(at=123).value) == ("at", 123)


@pytest.mark.slow
@pytest.mark.topologies
def test_checkpoint_keeps_a_long_job_leased(url, raw, queue):
    """A 1.2 s handler under a 400 ms lease is extended, never reaped by a second,
    reaping consumer on the same queue, and runs exactly once."""
    runs: list[int] = []
    scores: list[float] = []
    jid = ids.mint()

    async def slow(job: Job) -> None:
        runs.append(job.attempts)
        for _ in range(6):
            await asyncio.sleep(0.2)
            scores.append(raw.zscore(k(queue, "active"), jid) or 0.0)

    async def main() -> None:
        async with await AsyncConnector.connect(url) as conn:
            await jobs.enqueue(conn, queue, jid, b"p")
            first = Consumer(conn, queue, slow, lease_ms=400, beat_ms=50)
            second = Consumer(conn, queue, slow, lease_ms=400, beat_ms=50)
            async with served(first):
                await until(lambda: bool(runs))
                async with served(second):
                    await until(lambda: first.stats.completed == 1, timeout=5)
            assert second.stats.claimed == 0 and second.stats.reaped == 0

    asyncio.run(main())
    assert runs == [1]
    assert scores[-1] > scores[0]  # the lease expiry moved forward while it ran
    assert not raw.exists(keyspace.job_key(queue, jid))


@pytest.mark.slow
@pytest.mark.topologies
def test_idle_consumer_blocks_on_the_wake_list(url, raw, queue):
    """With a 1 s beat, an idle consumer issues about one BLPOP a beat (no hot polling) and
    still starts an enqueued job within a fraction of that beat, woken by the enqueue."""
    started: list[float] = []

    async def handler(job: Job) -> None:
        started.append(time.monotonic())

    def blpops() -> int:
        stats = raw.info("commandstats")
        return int(stats.get("cmdstat_blpop", {}).get("calls", 0))

    async def main() -> float:
        async with (await AsyncConnector.connect(url) as conn,
                    served(Consumer(conn, queue, handler, beat_ms=1000))):
            await asyncio.sleep(0.3)
            before = blpops()
            await asyncio.sleep(1.5)
            idle_calls = blpops() - before
            assert idle_calls <= 4, f"idle consumer polled {idle_calls} times in 1.5 s"
            t0 = time.monotonic()
            await jobs.enqueue(conn, queue, ids.mint(), b"p")
            await until(lambda: bool(started), timeout=2)
        return started[0] - t0

    latency = asyncio.run(main())
    assert latency < 0.3, f"enqueued job started {latency * 1000:.0f} ms later (beat 1000 ms)"


def test_unknown_route_is_dead_at_once_with_its_text(url, raw, queue):
    def router(job: Job):
        raise LookupError("no task named 'nope' in this app")

    jid = ids.mint()
    consumer = consume(url, queue, lambda c: c.stats.dead == 1, enqueue=[jid], router=router)
    assert consumer.stats.retried == 0  # unroutable is permanent: no retries
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert (row[b"state"], row[b"attempts"]) == (b"dead", b"1")
    assert row[b"error"] == b"LookupError: no task named 'nope' in this app"


def test_consumer_guards_before_io():
    with pytest.raises(TypeError):
        Consumer(object(), "q")
    with pytest.raises(ValueError):
        Consumer(object(), "q", lambda j: None, concurrency=0)
    with pytest.raises(ValueError):
        Consumer(object(), "a{b", lambda j: None)
    with pytest.raises(ValueError):
        Consumer(object(), "q", lambda j: None, backoff=("nope",))


@pytest.mark.slow
@pytest.mark.parametrize("pooled", [False, True], ids=["lone-consumer", "pooled+metronome"])
def test_degraded_mode_across_a_server_restart(tmp_path, queue, pooled):
    """The server stops for 3 s and comes back on the same port with its data: the loops
    sleep on the exponential curve over the beat, recover, and finish every job."""
    port, password, beat = free_port(), "restart-pw", 100
    srv = EmbeddedServer(port=port, data_dir=tmp_path, password=password).start()
    done: dict[str, int] = {}
    total = 40

    async def handler(job: Job) -> None:
        await asyncio.sleep(0.05)
        done[job.id] = done.get(job.id, 0) + 1

    async def main(srv: EmbeddedServer) -> tuple[list[list[int]], EmbeddedServer]:
        conn = await AsyncConnector.connect(srv.url)
        await jobs.enqueue_many(conn, queue, [(ids.mint(), b"p") for _ in range(total)])
        consumer = Consumer(conn, queue, handler, concurrency=2, beat_ms=beat, pooled=pooled)
        stop = asyncio.Event()
        task = asyncio.ensure_future(consumer.serve(stop, grace_s=5))
        metronome = Metronome(conn, [queue], beat_ms=beat) if pooled else None
        beats = asyncio.ensure_future(metronome.run(stop)) if metronome else None
        await until(lambda: len(done) >= 6)
        await asyncio.to_thread(srv.stop)
        await asyncio.sleep(3.0)
        srv = EmbeddedServer(port=port, data_dir=tmp_path, password=password)
        await asyncio.to_thread(srv.start)
        await until(lambda: len(done) == total and consumer.stats.completed >= total - 2,
                    timeout=30)
        # the last handlers may have run while their acks still wait out the outage's
        # backoff: settle before reading the sets, or the read races those acks
        for _ in range(100):
            left = await jobs.counts(conn, queue)
            if not any(left.values()):
                break
            await asyncio.sleep(0.1)
        stop.set()
        await task
        if beats is not None:
            await beats
        await conn.close()
        assert all(v == 0 for v in left.values()), left
        loops = [consumer.stats.degraded_sleeps]
        if metronome is not None:
            loops.append(metronome.stats.degraded_sleeps)
        return loops, srv

    try:
        loops, srv = asyncio.run(main(srv))
    finally:
        srv.stop()
    cap = max(30_000, beat)
    # the loop that kept beating through the outage (the consumer's legs, or the metronome)
    sleeps = loops[-1]
    assert len(sleeps) >= 4  # 100 + 200 + 400 + 800 < 3 s down
    assert sum(sleeps[:-1]) < 3_000 + 2_000
    for got in loops:  # every loop that degraded followed the curve from streak 1
        assert got == [backoff.delay_ms(("exponential", beat, cap), n)
                       for n in range(1, len(got) + 1)]
    assert len(done) == total


@pytest.mark.slow
@pytest.mark.parametrize("beat", [100, 2_000])
@pytest.mark.topologies
def test_scheduled_job_starts_at_its_run_at_not_at_the_next_beat(url, raw, queue, beat):
    """After each promote the legs read the next run-at and wake at it, so a job due at T
    starts just after T whatever the beat: with a 2 s beat it still starts well inside one
    beat (without the due wake it would start up to 2 s late). Server clock on both sides."""
    started: dict[str, int] = {}

    async def handler(job: Job) -> None:
        started[job.id] = server_ms(raw)

    async def main() -> dict[str, int]:
        due: dict[str, int] = {}
        async with (await AsyncConnector.connect(url) as conn,
                    served(Consumer(conn, queue, handler, beat_ms=beat))):
            for delay in (150, 420, 730):
                jid = ids.mint()
                await jobs.enqueue_in(conn, queue, jid, b"p", delay)
                due[jid] = int(raw.zscore(k(queue, "schedule"), jid))
            await until(lambda: len(started) == 3, timeout=5)
        return due

    due = asyncio.run(main())
    for jid, run_at in due.items():
        late = started[jid] - run_at
        assert 0 <= late <= 60, f"started {late} ms after its run-at (beat {beat} ms)"


def test_one_beat_by_hand_reaps_promotes_then_claims(url, raw, queue):
    """``beat()`` runs the legs in order: the recovery leg returns an expired lease, promote
    releases a due job, and the claims take both (up to the free concurrency)."""
    ran: list[str] = []

    async def handler(job: Job) -> None:
        ran.append(job.id)

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        stalled, due, extra = ids.mint(), ids.mint(), ids.mint()
        await jobs.enqueue(conn, queue, stalled, b"p")
        assert (await jobs.claim(conn, queue, 1)).id == stalled  # a lease nobody acks
        await jobs.enqueue_in(conn, queue, due, b"p", 0)
        await asyncio.sleep(0.01)
        consumer = Consumer(conn, queue, handler, concurrency=2)
        assert await consumer.beat() == 2
        assert (consumer.stats.reaped, consumer.stats.promoted) == (1, 1)
        await jobs.enqueue(conn, queue, extra, b"p")
        assert await consumer.drain(5) == 0
        assert sorted(ran) == sorted([stalled, due])
        assert await consumer.beat() == 1  # the free slots take the next one
        assert await consumer.drain(5) == 0
        assert ran[-1] == extra
        pooled = Consumer(conn, queue, handler, pooled=True)
        await jobs.enqueue_in(conn, queue, ids.mint(), b"p", 0)
        assert await pooled.beat() == 0  # pooled: no promote of its own
        await conn.close()

    asyncio.run(main())
    assert raw.zcard(k(queue, "active")) == 0


def test_a_delay_spends_no_attempt_of_the_retry_budget(url, raw, queue):
    """max_attempts=2 with one self-delay: the job fails twice before it is dead (three
    claims), and the backoff is indexed by failures-so-far, not by claims."""
    policy = ("exponential", 40, 1000)
    retries: list[tuple[int, int]] = []
    jid = ids.mint()

    async def handler(job: Job) -> None:
        if job.attempts == 1:
            raise Delay(30)
        raise RuntimeError(f"fail on claim {job.attempts}")

    def on_event(ev: Event) -> None:
        if ev.kind == "retrying":
            retries.append((ev.info["tried"], ev.info["delay_ms"]))

    consumer = consume(url, queue, lambda c: c.stats.dead == 1, enqueue=[jid], timeout=5,
                       handler=handler, max_attempts=2, backoff=policy, beat_ms=20,
                       on_event=on_event)
    assert retries == [(1, backoff.delay_ms(policy, 1))]
    assert (consumer.stats.delayed, consumer.stats.retried, consumer.stats.dead) == (1, 1, 1)
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert (row[b"state"], row[b"attempts"], row[b"delays"], row[b"failures"]) == (
        b"dead", b"3", b"1", b"2")
