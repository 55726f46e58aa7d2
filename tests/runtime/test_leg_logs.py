"""What a worker's beat says (issue 32): one line when it reaps stalled jobs and when it
expires jobs past their deadline; the metronome's first leases in one line per beat, not
one per queue."""

from __future__ import annotations

import asyncio
import logging
import time

from echomq import AsyncConnector
from echomq.core import ids
from echomq.core.payload import encode
from echomq.runtime.beat import Legs, run_legs
from echomq.runtime.metronome import Metronome
from echomq.verbs import jobs, workers


def test_a_reap_and_an_expiry_are_each_one_line(conn, url, queue, caplog):
    stalled = ids.mint()
    jobs.enqueue(conn, queue, stalled, encode("t", []))
    assert jobs.claim(conn, queue, 1) is not None  # a 1 ms lease: it lapses at once
    # a hung worker still lists it as running: the line names that worker
    workers.register(conn, workers.Registration(
        id=f"w-{queue}", host="box", pid=1, app="a:app", queues=(queue,), concurrency=1,
        wire=4, version="test", heartbeat_ms=5_000))
    workers.heartbeat(conn, f"w-{queue}", 5_000, [workers.Running(stalled, queue, "t", 0, 1)])
    late = ids.mint()
    jobs.admit(conn, queue, late, encode("t", []), mode="in", value=10_000, expires_ms=5)
    time.sleep(0.05)

    async def main() -> None:
        aconn = await AsyncConnector.connect(url)
        try:
            await run_legs(aconn, queue, Legs(), 1)
        finally:
            await aconn.close()

    try:
        with caplog.at_level(logging.INFO, logger="echomq"):
            asyncio.run(main())
    finally:
        workers.unregister(conn, f"w-{queue}")
    said = [r.getMessage() for r in caplog.records]
    assert [m for m in said if m.startswith("reaped")] == [
        f"reaped 1 stalled job on {queue}: {stalled} (t, held by w-{queue}); its lease lapsed "
        "with no worker renewing it: back to pending (dead past max_stalled)"]
    assert any(m.startswith(f"expired 1 job on {queue}") for m in said), said


def test_the_metronome_says_its_first_leases_in_one_line(url, queue, caplog):
    queues = [f"{queue}-{i}" for i in range(12)]

    async def main() -> None:
        aconn = await AsyncConnector.connect(url)
        try:
            await Metronome(aconn, queues, beat_ms=50, owner="m1").tick()
        finally:
            await aconn.close()

    with caplog.at_level(logging.INFO, logger="echomq"):
        asyncio.run(main())
    holds = [r.getMessage() for r in caplog.records if "holds" in r.getMessage()]
    assert holds == [f"metronome m1 holds 12 queues: {', '.join(queues[:5])} and 7 more"]
