"""A primary that fails over costs its own shard, not the healthy ones.

Through one ``AsyncConnector`` (as a worker holds one for all its queues), calls keep going
to a queue on a healthy primary and to one on the primary that is SIGKILLed: the calls to
the dead shard fail until its replica is promoted; the healthy shard's calls never fail and
never wait on the dead one. valkey-py's stock async cluster client closed every node's
connections at the first failure and refreshed the topology for every caller, so the
healthy calls failed with it (``echomq.connectors.steady``). The Metronome degrades per
queue for the same reason: a queue on the dead shard rests, the others keep their beat.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from echomq import AsyncConnector, errors, ids, keyspace
from echomq.embedded.cluster import LocalCluster
from echomq.runtime.metronome import Metronome
from echomq.verbs import jobs

pytestmark = pytest.mark.slow


def _queues_on_two_shards(cl: LocalCluster) -> tuple[str, str]:
    """A queue on the first primary and one on another."""
    first = cl.owner(keyspace.queue_key("sick0", "pending"))
    for i in range(1, 200):
        name = f"well{i}"
        if cl.owner(keyspace.queue_key(name, "pending")).port != first.port:
            return "sick0", name
    raise AssertionError("no second shard")  # pragma: no cover


def test_the_healthy_shard_never_fails_while_another_fails_over():
    with LocalCluster(masters=3, replicas=1) as cl:
        sick, well = _queues_on_two_shards(cl)
        victim = cl.owner(keyspace.queue_key(sick, "pending"))

        async def main() -> dict[str, object]:
            conn = await AsyncConnector.connect(cl.url)
            counts = {"well_ok": 0, "well_failed": 0, "sick_ok": 0, "sick_failed": 0}
            slowest = [0.0]
            stop = asyncio.Event()

            async def hammer(queue: str, key: str) -> None:
                while not stop.is_set():
                    began = time.monotonic()
                    try:
                        await jobs.enqueue(conn, queue, ids.mint(), b"x")
                        counts[f"{key}_ok"] += 1
                        if key == "well":
                            slowest[0] = max(slowest[0], time.monotonic() - began)
                    except errors.EchoMQError:
                        counts[f"{key}_failed"] += 1
                        await asyncio.sleep(0.01)

            tasks = [asyncio.ensure_future(hammer(well, "well")) for _ in range(4)]
            tasks += [asyncio.ensure_future(hammer(sick, "sick")) for _ in range(4)]
            await asyncio.sleep(0.5)
            victim.kill()
            await asyncio.to_thread(cl.wait_ok, 20)
            await asyncio.sleep(0.5)  # and a little after the promotion
            stop.set()
            await asyncio.gather(*tasks)
            await conn.close()
            return {**counts, "slowest_well_s": slowest[0]}

        got = asyncio.run(main())
    print("\nhealthy and failing shard through a failover:", got)
    assert got["sick_failed"] > 0, got  # the dead shard did fail: the drill is real
    assert got["well_failed"] == 0, got
    assert got["slowest_well_s"] < 0.5, got  # never stuck behind the dead node


def test_the_metronome_beats_on_for_the_other_queues(url, raw, queue):
    """A queue whose beat fails (its metronome key is of the wrong type here, as a primary
    that answers errors) rests on its own curve; the other queue is promoted on time."""
    bad = queue + "bad"
    raw.hset(keyspace.queue_key(bad, "metronome"), "x", "y")  # WRONGTYPE for its lease

    async def main() -> tuple[int, list[int]]:
        conn = await AsyncConnector.connect(url)
        metronome = Metronome(conn, [bad, queue], beat_ms=50)
        stop = asyncio.Event()
        beats = asyncio.ensure_future(metronome.run(stop))
        await asyncio.sleep(0.3)
        jid = ids.mint()
        await jobs.enqueue_in(conn, queue, jid, b"x", 100)
        began = time.monotonic()
        while (await jobs.counts(conn, queue))["pending"] == 0:
            assert time.monotonic() - began < 2, "the good queue was never promoted"
            await asyncio.sleep(0.01)
        stop.set()
        await beats
        await conn.close()
        return metronome.stats.passes[queue], metronome.stats.degraded_sleeps

    passes, sleeps = asyncio.run(main())
    assert passes >= 4
    assert sleeps[:3] == [50, 100, 200]  # the bad queue's own curve
