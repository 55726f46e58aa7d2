"""The Consumer on the native hot path: at wire 6 its claims and its batched acks are
``EMQ.CLAIM`` and ``EMQ.ACKMANY`` (with their next claim in the same round trip), on a single
server and on a cluster whose every node has the module; none is handed back to a script
for a plain queue, and a grouped job is (the script claims and acks it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from echomq import AsyncConnector, native
from echomq.core import ids
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Job
from echomq.verbs import jobs
from tests.support.polling import until

pytestmark = pytest.mark.skipif(not native.available(), reason="the EMQ module is not built")

HOT = ("emq.claim", "emq.ackmany", "emq.ack")


def hot_calls(raw: Any) -> dict[str, tuple[int, int]]:
    """(calls, failed calls) of the hot path's native commands, over every primary."""
    nodes = (raw.get_primaries() if hasattr(raw, "get_primaries") else [None])
    out = {n: (0, 0) for n in HOT}
    for node in nodes:
        stats = (raw.info("commandstats") if node is None
                 else raw.info("commandstats", target_nodes=node))
        for name in HOT:
            got = stats.get(f"cmdstat_{name}", {})
            calls, failed = out[name]
            out[name] = (calls + int(got.get("calls", 0)), failed + int(got.get("failed_calls", 0)))
    return out


def drain(url: str, queue: str, n: int, admit: Callable[[Any, str], Any]) -> Consumer:
    async def handler(job: Job) -> None:
        return None

    async def main() -> Consumer:
        async with await AsyncConnector.connect(url, wire=6) as conn:
            for _ in range(n):
                await admit(conn, ids.mint())
            consumer = Consumer(conn, queue, handler, concurrency=8, beat_ms=50)
            stop = asyncio.Event()
            task = asyncio.ensure_future(consumer.serve(stop, grace_s=5))
            await until(lambda: consumer.stats.completed == n, timeout=20)
            stop.set()
            await task
            assert (await jobs.counts(conn, queue))["active"] == 0
        return consumer

    return asyncio.run(main())


@pytest.mark.topologies
def test_the_consumer_claims_and_acks_natively_at_wire_6(url: str, raw: Any, queue: str) -> None:
    before = hot_calls(raw)
    drain(url, queue, 60,
          lambda conn, jid: jobs.enqueue(conn, queue, jid, b"p", priority=ord(jid[-1]) % 3))
    after = hot_calls(raw)
    assert after["emq.claim"][0] > before["emq.claim"][0]
    assert after["emq.ackmany"][0] > before["emq.ackmany"][0]
    for name in HOT:  # a plain queue: nothing handed back to a script
        assert after[name][1] == before[name][1], name


def test_grouped_jobs_are_claimed_and_acked_natively(url: str, raw: Any, queue: str) -> None:
    before = hot_calls(raw)
    drain(url, queue, 10,
          lambda conn, jid: jobs.enqueue(conn, queue, jid, b"p", group=f"g{ord(jid[-1]) % 3}"))
    after = hot_calls(raw)
    assert after["emq.claim"][0] > before["emq.claim"][0]
    for name in HOT:  # the ring and the groups' counts: nothing handed back to a script
        assert after[name][1] == before[name][1], name
