"""The opt-in Pump on a real Valkey: cadence, racing pumps, a pump killed mid-tick, limits."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import valkey

from echomq import AsyncConnector
from echomq.core import errors, ids, keyspace
from echomq.core.steps import Batch
from echomq.runtime.pump import Pump
from echomq.verbs import jobs, repeat
from tests.support.polling import wait_for


def pending(raw: valkey.Valkey, queue: str) -> list[str]:
    return [m.decode() for m in raw.zrange(keyspace.queue_key(queue, "pending"), 0, -1)]


def fired(raw: valkey.Valkey, queue: str, name: str) -> int:
    return int(raw.hget(keyspace.repeat_key(queue, name), "fired") or 0)


@pytest.fixture
def loop() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def aconn(loop: asyncio.Runner, url: str) -> Iterator[AsyncConnector]:
    conn = loop.run(AsyncConnector.connect(url))
    yield conn
    loop.run(conn.close())


async def run_for(pump: Pump, seconds: float) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(pump.run(stop))
    await asyncio.sleep(seconds)
    stop.set()
    await task


@pytest.mark.slow
def test_a_registration_fires_on_cadence(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    loop.run(repeat.upsert(aconn, queue, "beat", template=b'{"n":1}', every_ms=200))
    loop.run(run_for(Pump(aconn, [queue], tick_ms=20), 1.1))
    got = pending(raw, queue)
    # t=0, ~0.2, ~0.4, ~0.6, ~0.8, ~1.0 at most; a slow machine may see fewer
    assert 3 <= len(got) <= 6
    assert len(set(got)) == len(got)
    assert got == sorted(got)  # pending byte order = mint order = firing order
    stamps = [ids.timestamp_ms(i) for i in got]
    # each next run is measured from the firing moment: never closer than one period
    assert all(b - a >= 195 for a, b in itertools.pairwise(stamps))
    for jid in got:
        assert raw.hget(keyspace.job_key(queue, jid), "payload") == b'{"n":1}'
    assert fired(raw, queue, "beat") == len(got)


def test_tick_promotes_due_scheduled_jobs_and_reports(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    for _ in range(5):
        loop.run(jobs.enqueue_in(aconn, queue, ids.mint(), b"s", 0))
    loop.run(repeat.upsert(aconn, queue, "r", template=b"t", every_ms=60_000))
    report = loop.run(Pump(aconn, [queue], promote_batch=2).tick())
    q = report["queues"][queue]
    assert (report["promoted"], report["fired"], q["promoted"], q["fired"]) == (5, 1, 5, 1)
    assert len(pending(raw, queue)) == 6
    assert report["ids"] == q["ids"] and len(report["ids"]) == 1
    again = loop.run(Pump(aconn, [queue]).tick())
    assert (again["promoted"], again["fired"]) == (0, 0)


def test_the_pump_does_not_reap(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    loop.run(jobs.enqueue(aconn, queue, ids.mint(), b"x"))
    claim = loop.run(jobs.claim(aconn, queue, 1))
    loop.run(asyncio.sleep(0.02))  # the lease has expired
    loop.run(Pump(aconn, [queue]).tick())
    assert raw.zscore(keyspace.queue_key(queue, "active"), claim.id) is not None


def test_two_pumps_racing_on_100_due_registrations_enqueue_exactly_100(
    loop: asyncio.Runner, url: str, raw: valkey.Valkey, queue: str
) -> None:
    async def race() -> list[dict[str, Any]]:
        a = await AsyncConnector.connect(url)
        b = await AsyncConnector.connect(url)
        try:
            for i in range(100):
                await repeat.upsert(a, queue, f"r{i:03d}", template=f"t{i}", every_ms=3_600_000)
            one, two = Pump(a, [queue]), Pump(b, [queue])
            # both read the same due set before either fires
            return list(await asyncio.gather(one.tick(), two.tick()))
        finally:
            await a.close()
            await b.close()

    reports = loop.run(race())
    assert sum(r["fired"] for r in reports) == 100
    assert len(pending(raw, queue)) == 100
    assert all(fired(raw, queue, f"r{i:03d}") == 1 for i in range(100))
    # whoever lost a name saw it raced, and wrote nothing for it
    raced = sum(r["queues"][queue]["reasons"].get("raced", 0) for r in reports)
    assert raced == sum(r["skipped"] for r in reports)
    payloads = {raw.hget(keyspace.job_key(queue, j), "payload") for j in pending(raw, queue)}
    assert payloads == {f"t{i}".encode() for i in range(100)}


def test_two_running_pumps_keep_one_occurrence_per_period(
    loop: asyncio.Runner, url: str, raw: valkey.Valkey, queue: str
) -> None:
    async def both() -> None:
        a = await AsyncConnector.connect(url)
        b = await AsyncConnector.connect(url)
        try:
            for i in range(20):
                await repeat.upsert(a, queue, f"r{i}", template=b"t", every_ms=300)
            await asyncio.gather(
                run_for(Pump(a, [queue], tick_ms=5), 0.7), run_for(Pump(b, [queue], tick_ms=5), 0.7)
            )
        finally:
            await a.close()
            await b.close()

    loop.run(both())
    for i in range(20):
        n = fired(raw, queue, f"r{i}")
        # fired at ~0, ~0.3, ~0.6: never twice for one period however the pumps interleave
        assert 2 <= n <= 3, (i, n)
    assert len(pending(raw, queue)) == sum(fired(raw, queue, f"r{i}") for i in range(20))


class DyingConnector:
    """An ``AsyncConnector`` stand-in that dies on its ``fail_at``-th call.

    ``mode``: ``before`` (nothing of that call reaches the server), ``after`` (the call ran,
    its reply is lost) or ``partial`` (a pipelined batch ran its first half only). The
    death is a ``WireError``, what a broken connection raises.
    """

    is_async = True

    def __init__(
        self, inner: AsyncConnector, fail_at: int, mode: str, exc: Exception | None = None
    ) -> None:
        self.inner, self.fail_at, self.mode, self.calls = inner, fail_at, mode, 0
        self.exc = exc

    async def execute(self, step: Any) -> Any:
        self.calls += 1
        if self.calls != self.fail_at:
            return await self.inner.execute(step)
        if self.mode == "after":
            await self.inner.execute(step)
        elif self.mode == "partial" and isinstance(step, Batch):
            await self.inner.execute(Batch(step.steps[: len(step.steps) // 2]))
        raise self.exc or errors.WireError(f"killed at call {self.calls} ({self.mode})")


@pytest.mark.parametrize("mode", ["before", "after", "partial"])
@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_a_pump_killed_mid_tick_loses_nothing_and_doubles_nothing(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, fail_at: int, mode: str
) -> None:
    # one tick on one queue is four calls: promote, the due read, the records, the fires
    queue = "k" + uuid.uuid4().hex[:12]
    names = [f"r{i}" for i in range(6)]
    for name in names:
        loop.run(repeat.upsert(aconn, queue, name, template=name, every_ms=3_600_000))
    loop.run(jobs.enqueue_in(aconn, queue, ids.mint(), b"scheduled", 0))
    dying = DyingConnector(aconn, fail_at, mode)
    with pytest.raises(errors.WireError):
        loop.run(Pump(dying, [queue]).tick())
    assert dying.calls == fail_at
    # a fresh pump (the restarted process) picks up whatever the dead one left
    loop.run(Pump(aconn, [queue]).tick())
    assert [fired(raw, queue, n) for n in names] == [1] * 6
    got = pending(raw, queue)
    assert len(got) == 7 and len(set(got)) == 7
    payloads = sorted(raw.hget(keyspace.job_key(queue, j), "payload") for j in got)
    assert payloads == sorted([n.encode() for n in names] + [b"scheduled"])
    # and nothing more is due
    assert loop.run(Pump(aconn, [queue]).tick())["fired"] == 0


def test_a_running_pump_rides_out_wire_errors(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    loop.run(repeat.upsert(aconn, queue, "r", template=b"t", every_ms=3_600_000))
    dying = DyingConnector(aconn, 1, "before")
    pump = Pump(dying, [queue], tick_ms=20)
    loop.run(run_for(pump, 0.3))
    assert pump.ticks >= 1
    assert fired(raw, queue, "r") == 1


def test_a_running_pump_logs_a_refusal_and_goes_on(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    loop.run(repeat.upsert(aconn, queue, "r", template=b"t", every_ms=3_600_000))
    refused = errors.StateError("EMQSTATE promote lane not native")
    pump = Pump(DyingConnector(aconn, 1, "before", refused), [queue], tick_ms=20)
    loop.run(run_for(pump, 0.3))
    assert fired(raw, queue, "r") == 1


def test_limit_three_under_a_running_pump(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    loop.run(repeat.upsert(aconn, queue, "r", template=b"t", every_ms=30, limit=3))
    loop.run(run_for(Pump(aconn, [queue], tick_ms=10), 0.6))
    assert len(pending(raw, queue)) == 3
    assert fired(raw, queue, "r") == 3
    assert raw.hget(keyspace.repeat_key(queue, "r"), "done") == b"limit"


def test_flow_hook_runs_per_queue_per_tick(
    loop: asyncio.Runner, aconn: AsyncConnector, queue: str
) -> None:
    seen: list[str] = []

    async def flows(conn: Any, q: str) -> int:
        seen.append(q)
        return 2

    other = queue + "b"
    report = loop.run(Pump(aconn, [queue, other], flows=flows).tick())
    assert seen == [queue, other] and report["flows"] == 4


def test_pump_guards(aconn: AsyncConnector, conn: Any) -> None:
    with pytest.raises(TypeError, match="AsyncConnector"):
        Pump(conn, ["q"])
    with pytest.raises(TypeError):
        Pump(aconn, "q")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Pump(aconn, ["bad{q}"])
    with pytest.raises(ValueError):
        Pump(aconn, ["q"], tick_ms=0)


PUMP_PROCESS = """
import asyncio, sys
from echomq import AsyncConnector
from echomq.runtime.pump import Pump

async def main():
    conn = await AsyncConnector.connect(sys.argv[1])
    pump = Pump(conn, [sys.argv[2]], tick_ms=1)
    print("ready", flush=True)
    while True:
        await pump.tick()

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("delay_ms", [0, 40, -1])
def test_a_pump_process_killed_mid_sweep(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, url: str, delay_ms: int
) -> None:
    """SIGKILL a Pump process at a fixed delay, or (``-1``) the moment its first occurrence
    appears, which lands in the middle of its pipelined sweep; a restarted Pump completes
    it without doubling any registration."""
    import subprocess
    import sys
    import time

    queue = "p" + uuid.uuid4().hex[:12]
    names = [f"r{i:03d}" for i in range(300)]
    for name in names:
        loop.run(repeat.upsert(aconn, queue, name, template=name, every_ms=3_600_000))
    proc = subprocess.Popen(
        [sys.executable, "-c", PUMP_PROCESS, url, queue], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        if delay_ms >= 0:
            time.sleep(delay_ms / 1000)
        else:
            # every=0: the kill lands as soon as the first write shows, mid-pipeline
            wait_for(lambda: raw.zcard(keyspace.queue_key(queue, "pending")), 10,
                     "the pump process to fire", every=0)
    finally:
        proc.kill()  # SIGKILL: no cleanup, whatever the pipeline had sent is all it did
        proc.wait(timeout=10)
    loop.run(Pump(aconn, [queue]).tick())
    assert [fired(raw, queue, n) for n in names] == [1] * 300
    got = pending(raw, queue)
    assert len(got) == 300 and len(set(got)) == 300


def test_a_tick_drains_more_due_names_than_one_sweep_batch(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    for i in range(30):
        loop.run(repeat.upsert(aconn, queue, f"r{i}", template=b"t", every_ms=3_600_000))
    pump = Pump(aconn, [queue])
    pump.sweep_batch = 7
    assert loop.run(pump.tick())["fired"] == 30
    assert len(pending(raw, queue)) == 30


def test_a_paused_registration_is_not_fired_by_a_tick_until_resumed(
    loop: asyncio.Runner, aconn: AsyncConnector, raw: valkey.Valkey, queue: str
) -> None:
    loop.run(repeat.upsert(aconn, queue, "beat", template=b"t", every_ms=60_000))
    loop.run(repeat.pause(aconn, queue, "beat"))
    score = raw.zscore(keyspace.queue_key(queue, "repeat"), "beat")
    assert score is not None and score <= repeat.now_ms()  # due right now
    for _ in range(3):
        assert loop.run(Pump(aconn, [queue]).tick())["fired"] == 0
    assert pending(raw, queue) == [] and fired(raw, queue, "beat") == 0
    assert raw.zscore(keyspace.queue_key(queue, "repeat"), "beat") == score
    assert loop.run(repeat.resume(aconn, queue, "beat")) == "resumed"
    assert loop.run(Pump(aconn, [queue]).tick())["fired"] == 1
    assert len(pending(raw, queue)) == 1 and fired(raw, queue, "beat") == 1
