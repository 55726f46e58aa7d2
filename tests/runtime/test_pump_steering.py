"""Recurrence you can steer, through running Pumps (DESIGN §3c): jittered registrations fire
exactly once per period with two racing Pumps; a registration paused until an instant
resumes within 50 ms of it at a 1 s tick; with ``clock="server"`` a Pump host whose clock is
5 minutes fast fires on the server's time, and with the default on its own (``faketime``).
Single server and cluster."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import textwrap

import pytest

from echomq import AsyncConnector
from echomq.core import ids, keyspace
from echomq.core.recurrence import jitter_offset
from echomq.runtime.pump import Pump
from echomq.verbs import jobs, repeat
from tests.support.clients import client_for, server_ms
from tests.support.polling import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.topologies]


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


async def run_pumps(url: str, queue: str, seconds: float, n: int = 2, **opts) -> list[Pump]:
    conns = [await AsyncConnector.connect(url) for _ in range(n)]
    pumps = [Pump(c, [queue], legs=("repeats",), **opts) for c in conns]
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(p.run(stop)) for p in pumps]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    for c in conns:
        await c.close()
    return pumps


def test_two_racing_pumps_fire_each_jittered_period_once(url, queue):
    raw = client_for(url)
    every, jitter = 200, 150

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        await repeat.upsert(conn, queue, "j", template=b"t", every_ms=every,
                            jitter_ms=jitter, catchup="latest")
        await conn.close()
        await run_pumps(url, queue, 2.0, tick_ms=20)

    asyncio.run(main())
    slots = sorted(int(s) for s in raw.zrange(k(queue, "repeat:j:slots"), 0, -1))
    fired = int(raw.hget(keyspace.repeat_key(queue, "j"), "fired"))
    jobs_made = raw.zcard(k(queue, "pending")) + raw.zcard(k(queue, "schedule"))
    # one occurrence per period: as many jobs as slots fired, no slot twice, on the grid
    assert 7 <= fired == len(slots) == jobs_made, (fired, len(slots), jobs_made)
    assert all((b - a) % every == 0 for a, b in itertools.pairwise(slots))
    for _member, score in raw.zrange(k(queue, "schedule"), 0, -1, withscores=True):
        run_at = int(score)
        slot = max(s for s in slots if s <= run_at)
        assert run_at == slot + jitter_offset("j", slot, jitter)


def test_a_paused_registration_resumes_within_50_ms_at_a_1_s_tick(url, queue):
    raw = client_for(url)

    async def main() -> tuple[int, list[str]]:
        conn = await AsyncConnector.connect(url)
        await repeat.upsert(conn, queue, "p", template=b"t", every_ms=3_600_000)
        pump = Pump(conn, [queue], tick_ms=1_000, legs=("repeats",))
        stop = asyncio.Event()
        task = asyncio.ensure_future(pump.run(stop))
        await asyncio.sleep(0.2)  # fired its first slot; the tick planned a second out
        until = await jobs.server_now_ms(conn) + 1_300
        await repeat.pause(conn, queue, "p", until=until)
        await asyncio.sleep(2.0)
        stop.set()
        await task
        await conn.close()
        return until, [m.decode() for m in raw.zrange(k(queue, "pending"), 0, -1)]

    until, pending = asyncio.run(main())
    assert len(pending) == 2, pending  # the first slot, and the one at the resume
    late = ids.timestamp_ms(pending[1]) - until  # minted by the Pump as it fired
    assert 0 <= late <= 50, f"resumed {late} ms after the pause's end"


PUMP = textwrap.dedent("""
    import asyncio, sys
    from echomq import AsyncConnector
    from echomq.runtime.pump import Pump

    async def main():
        conn = await AsyncConnector.connect(sys.argv[1])
        pump = Pump(conn, [sys.argv[2]], tick_ms=20, legs=("repeats",), clock=sys.argv[3])
        stop = asyncio.Event()
        task = asyncio.ensure_future(pump.run(stop))
        await asyncio.sleep(float(sys.argv[4]))
        stop.set()
        await task
        await conn.close()

    asyncio.run(main())
""")


@pytest.mark.parametrize("clock", ["host", "server"])
def test_a_pump_host_5_minutes_fast(url, queue, clock, tmp_path):
    raw = client_for(url)
    conn_url = url
    from echomq import Connector

    conn = Connector.connect(conn_url)
    # registered on this (true) host: due 4 s from now on the server's clock (the Pump
    # process, started under faketime, is running well before then)
    repeat.upsert(conn, queue, "f", template=b"t", every_ms=60_000, first_in_ms=4_000)
    due = repeat.get(conn, queue, "f").next_at
    env = {**os.environ, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    started = server_ms(raw)
    proc = subprocess.Popen(["faketime", "-f", "+5m", sys.executable, "-c", PUMP, conn_url,
                             queue, clock, "6"], env=env, stderr=subprocess.PIPE)
    try:
        got = wait_for(lambda: raw.zcard(k(queue, "pending")) and server_ms(raw), 10,
                       "the occurrence", every=0.005)
    finally:
        proc.wait(20)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    entry = repeat.get(conn, queue, "f")
    if clock == "host":
        # the registry's clock is the Pump host's: it fires at once, early, and prices
        # the next run 5 minutes ahead of the server
        assert got - started < due - started
        assert entry.next_at - server_ms(raw) > 5 * 60_000
    else:
        # on the server's time: at its run-at (within the 20 ms tick), the next a minute on
        assert due <= got <= due + 200, (got - due)
        assert abs(entry.next_at - (due + 60_000)) < 1_000
    conn.close()
