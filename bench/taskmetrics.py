"""Per-task metrics: their cost on drain throughput (on vs off, alternating) and their
memory per task-day, on one fresh embedded Valkey.

    .venv/bin/python bench/taskmetrics.py                  # 30 rounds of 5,000 jobs, memory
    .venv/bin/python bench/taskmetrics.py --rounds 4 --n 2000 --no-memory

Drain: the runtime's ``Consumer`` (concurrency 50, async no-op handlers under four task
names) drains N pre-loaded jobs with ``task_metrics`` off and on, alternately (off, on, on,
off, ...) so drift and load hit both alike; each run gets a fresh queue and event loop.
The rate is N over the HOST monotonic time from the consumer's start to its N-th
completion. Printed: every run, the medians, and on/off of the medians and of each round
(the paired ratio: the two halves of a round share the box's load, so its median is the
figure to read on a shared machine), the load average, and the hot path's own cost
(``TaskTally.add`` per call, ``timeit``) beside the drain's CPU time per job.

Memory: a whole day written through ``taskmetrics.record`` (one flush a minute, 1,440 of
them, each stamped with its own minute), then ``MEMORY USAGE`` summed over the task's
window keys, plus its share of the totals hash (that hash measured with and without it).
Two profiles: "typical" (one outcome and two duration buckets move each minute) and
"worst" (every outcome and every bucket move each minute). The queue's throughput ring
(``emq:{q}:series``, 1,440 minute slots) is measured the same way, per queue.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
import timeit
from typing import Any

from echomq import AsyncConnector, Connector
from echomq.core import ids, keyspace
from echomq.core.steps import Command
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.runtime.route import Route
from echomq.runtime.taskstats import TaskTally
from echomq.verbs import jobs, taskmetrics

TASKS = ("bench.a", "bench.b", "bench.c", "bench.d")


async def _noop(_job: Any) -> None:
    return None


async def drain(url: str, n: int, on: bool, concurrency: int) -> tuple[float, float]:
    """One drain of ``n`` jobs with task metrics ``on`` or off: jobs/s (HOST monotonic)
    and this process's CPU µs per job (``time.process_time``: the worker's own cost, which
    the other processes on a shared box disturb far less than the wall clock)."""
    conn = await AsyncConnector.connect(url)
    queue = f"tm-{'on' if on else 'off'}-{ids.mint()[-8:]}"
    payloads = [t.encode() for t in TASKS]
    for start in range(0, n, 1000):
        await jobs.enqueue_many(conn, queue, [(ids.mint(), payloads[i % len(TASKS)])
                                              for i in range(start, min(n, start + 1000))])
    routes = {p: Route(_noop, name=p.decode()) for p in payloads}
    consumer = Consumer(conn, queue, router=lambda job: routes[job.payload],
                        concurrency=concurrency, task_metrics=on)
    stop = asyncio.Event()
    gc.collect()
    began, cpu = time.monotonic(), time.process_time()
    run = asyncio.ensure_future(consumer.run(stop))
    while consumer.stats.completed < n:
        await asyncio.sleep(0.002)
    took, cpu = time.monotonic() - began, time.process_time() - cpu
    stop.set()
    await run
    await consumer.drain(5)
    if on:  # the counts did land
        got = await taskmetrics.totals(conn, queue)
        assert sum(t.total for t in got.values()) == n, got
    await conn.close()
    return n / took, cpu / n * 1e6


def memory(url: str) -> dict[str, float]:
    conn = Connector.connect(url)
    now = jobs.server_now_ms(conn)
    out: dict[str, float] = {}
    profiles = {
        "typical": {"c": 30, "h2": 20, "h3": 10, "s": 600_000},
        "worst": {code: 3 for code in taskmetrics.CODES},
    }
    for name, codes in profiles.items():
        queue = f"tm-mem-{name}-{ids.mint()[-6:]}"
        slots = taskmetrics.empty()
        for code, v in codes.items():
            slots[taskmetrics.CODES.index(code)] = v
        # another task first, so the measured one's share of the totals hash is a delta
        taskmetrics.record(conn, queue, {"other.task": slots}, now)
        totals_key = taskmetrics.totals_key(queue)
        base = conn.execute(Command(("MEMORY", "USAGE", totals_key, "SAMPLES", "0")))
        for back in range(1440):
            taskmetrics.record(conn, queue, {"measured.task": slots}, now - back * 60_000)
        windows = [taskmetrics.window_key(queue, "measured.task", w) for w in
                   range((now // 60_000 - 1439) // 5, now // 60_000 // 5 + 1)]
        used = sum(int(conn.execute(Command(("MEMORY", "USAGE", k, "SAMPLES", "0"))) or 0)
                   for k in windows)
        after = conn.execute(Command(("MEMORY", "USAGE", totals_key, "SAMPLES", "0")))
        enc = conn.execute(Command(("OBJECT", "ENCODING", windows[-1])))
        out[f"{name}: windows (bytes)"] = used
        out[f"{name}: window keys"] = len(windows)
        out[f"{name}: totals share (bytes)"] = int(after) - int(base)
        out[f"{name}: per task-day (bytes)"] = used + int(after) - int(base)
        out[f"{name}: window encoding"] = enc.decode() if isinstance(enc, bytes) else enc
    # the queue's throughput ring: 1,440 minute slots of (stamp, completed, failed)
    queue = f"tm-ring-{ids.mint()[-6:]}"
    ring = keyspace.queue_key(queue, "series")
    minute = now // 60_000
    fields: list[Any] = []
    for m in range(minute - 1439, minute + 1):
        fields += [f"{m % 1440}:t", m, f"{m % 1440}:c", 1234, f"{m % 1440}:f", 12]
    conn.execute(Command(("HSET", ring, *fields)))
    out["queue ring, 1,440 minutes (bytes per queue)"] = int(
        conn.execute(Command(("MEMORY", "USAGE", ring, "SAMPLES", "0"))))
    conn.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--no-memory", action="store_true")
    args = ap.parse_args()
    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    try:
        seen: dict[bool, list[float]] = {False: [], True: []}
        cpus: dict[bool, list[float]] = {False: [], True: []}
        ratios = []
        asyncio.run(drain(srv.url, min(args.n, 2000), False, args.concurrency))  # warm up
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {}
            for on in order:
                got[on], us = asyncio.run(drain(srv.url, args.n, on, args.concurrency))
                seen[on].append(got[on])
                cpus[on].append(us)
                print(f"round {r + 1:2d} task metrics {'on ' if on else 'off'} "
                      f"{got[on]:10,.0f} jobs/s {us:6.1f} CPU µs/job", flush=True)
            ratios.append(got[True] / got[False])
        off, on = statistics.median(seen[False]), statistics.median(seen[True])
        print()
        print(f"| drain (N = {args.n:,}, concurrency {args.concurrency}) "
              f"| jobs/s (median of {args.rounds}) |")
        print("|---|---:|")
        print(f"| task metrics off | {off:,.0f} |")
        print(f"| task metrics on | {on:,.0f} |")
        print(f"| on / off (medians) | {on / off:.3f}x |")
        print(f"| on / off per round: median, min, max | {statistics.median(ratios):.3f}x, "
              f"{min(ratios):.3f}x, {max(ratios):.3f}x |")
        c_off, c_on = statistics.median(cpus[False]), statistics.median(cpus[True])
        print(f"| worker CPU µs per job, off / on (medians) | {c_off:.1f} / {c_on:.1f} "
              f"({c_off / c_on:.3f}x) |")
        tally = TaskTally()
        add = tally.add
        calls = 1_000_000
        per_add = min(timeit.repeat(lambda: add("bench.a", 0, 0.0003), number=calls,
                                    repeat=3)) / calls * 1e6
        print(f"| hot path: `TaskTally.add` per run (µs, best of 3 x 1M) | {per_add:.2f} "
              f"({per_add / c_off * 100:.1f}% of the CPU per job off) |")
        print(f"| load average at the end (1, 5, 15 min) | "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} |")
        if not args.no_memory:
            print()
            print("| memory (MEMORY USAGE) | value |")
            print("|---|---:|")
            for k, v in memory(srv.url).items():
                print(f"| {k} | {v:,} |" if isinstance(v, int) else f"| {k} | {v} |")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
