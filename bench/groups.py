"""Grouped work against flat work at wire 6, drained side by side in one run.

The same ``--n`` no-op jobs are drained twice per round and driver from a fresh queue on one
embedded server with the EMQ module loaded: ``flat`` (no group) and ``groups`` (spread
round robin over ``--groups`` groups, 1,000 by default: every claim walks the ring of ready
groups). Two drivers: ``consumer``, the runtime's ``Consumer`` (an async no-op handler,
``--concurrency`` slots); ``loop``, one client acking each batch of ``--concurrency`` and
claiming the next in one round trip, no handler (the server's side with the least Python).
The rows alternate within each round, so load from elsewhere hits both alike; each round
prints its own ratio, the summary the medians.

Throughput is jobs / (last handler call - first), on the HOST monotonic clock, so the
enqueue and the consumer's start-up are not counted. "native %" is the share of the
drain's server calls that were the module's claims and acks (``INFO commandstats``, reset
before the drain): successful ``emq.claim``/``emq.ack``/``emq.ackmany`` calls over those
plus every ``EVALSHA`` (a hand-back's script, and the beat's own scripts: reap and the
metronome, so the share is a lower bound). "server µs/job" is every command's time over the
drain (commandstats) per job: where the module's work shows when the drain is bound by the
Python consumer, not by the server. A short warm-up drain of each kind runs first (the first
drain in a process is the slower one).

    python bench/groups.py [--n 20000] [--groups 1000] [--concurrency 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any, NamedTuple

from echomq import AsyncConnector, Connector
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.verbs import jobs

NATIVE = ("emq.claim", "emq.ack", "emq.ackmany")
DRIVERS = ("consumer", "loop")


def fill(conn: Connector, queue: str, n: int, groups: int) -> None:
    """``n`` jobs on ``queue``: flat, or round robin over ``groups`` groups."""
    for lo in range(0, n, 500):
        part = range(lo, min(n, lo + 500))
        if groups:
            jobs.enqueue_many(conn, queue, [(ids.mint(), b"{}", {"group": f"g{i % groups}"})
                                            for i in part])
        else:
            jobs.enqueue_many(conn, queue, [(ids.mint(), b"{}") for _ in part])


async def drain(url: str, queue: str, n: int, concurrency: int) -> float:
    """Seconds from the first handler call to the n-th."""
    conn = await AsyncConnector.connect(url, wire=6)
    stop = asyncio.Event()
    seen: list[float] = []

    async def on_job(job: Any) -> None:
        seen.append(time.monotonic())
        if len(seen) >= n:
            stop.set()

    cons = Consumer(conn, queue, on_job, concurrency=concurrency)
    await cons.run(stop)
    await conn.close()
    return seen[-1] - seen[0]


def loop(conn: Connector, queue: str, n: int, batch: int) -> float:
    """Seconds to drain ``queue`` with one client: each round acks the last batch and
    claims the next in one round trip (``jobs.ack_and_claim``), no handler: the server's
    side of the drain with the least Python around it."""
    t0 = time.perf_counter()
    got = jobs.claim_many(conn, queue, 60_000, batch)
    while got:
        _, got = jobs.ack_and_claim(conn, queue, [(c.id, c.token) for c in got], 60_000, batch)
    return time.perf_counter() - t0


def calls(stats: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {name: (int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)),
                   int(stats.get(f"cmdstat_{name}", {}).get("failed_calls", 0)))
            for name in (*NATIVE, "evalsha")}


class Drained(NamedTuple):
    rate: float  # jobs/s
    native: float  # % of the claim/ack calls the module served
    usec: float  # the server's µs per job, every command counted


def one(srv: EmbeddedServer, conn: Connector, kind: str, n: int, args: argparse.Namespace,
        driver: str) -> Drained:
    queue = f"bg{kind}{os.getpid()}{ids.mint()[-6:]}".lower()
    fill(conn, queue, n, args.groups if kind == "groups" else 0)
    conn.client.config_resetstat()
    seconds = (asyncio.run(drain(srv.url, queue, n, args.concurrency)) if driver == "consumer"
               else loop(conn, queue, n, args.concurrency))
    stats = conn.client.info("commandstats")
    got = calls(stats)
    native = sum(got[c][0] - got[c][1] for c in NATIVE)
    usec = sum(float(v["usec"]) for k, v in stats.items() if k.startswith("cmdstat_"))
    conn.client.flushall()  # the next drain starts on an empty server
    return Drained(n / seconds, 100.0 * native / max(1, native + got["evalsha"][0]), usec / n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--groups", type=int, default=1_000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"n={args.n} groups={args.groups} concurrency={args.concurrency} "
          f"load: {os.getloadavg()[0]:.2f}")
    srv = EmbeddedServer(ephemeral=True).start()
    rows: dict[tuple[str, str], list[Drained]] = {}
    try:
        with Connector.connect(srv.url, wire=6) as conn:
            modules = [m[b"name"] if isinstance(m, dict) else m
                       for m in conn.client.execute_command("MODULE", "LIST")]
            if not modules:
                raise SystemExit("the embedded server has no EMQ module: wire 6 would not run")
            for kind in ("flat", "groups"):  # warm-up: the first drain in a process is slower
                one(srv, conn, kind, max(1, args.n // 10), args, "consumer")
            for r in range(args.repeat):
                for driver in DRIVERS:
                    for kind in ("flat", "groups") if r % 2 == 0 else ("groups", "flat"):
                        rows.setdefault((driver, kind), []).append(
                            one(srv, conn, kind, args.n, args, driver))
                    f, g = rows[(driver, "flat")][-1], rows[(driver, "groups")][-1]
                    print(f"round {r + 1}, {driver}: flat {f.rate:,.0f} jobs/s ({f.native:.1f}% "
                          f"native, server {f.usec:.1f} µs/job), {args.groups} groups "
                          f"{g.rate:,.0f} jobs/s ({g.native:.1f}% native, server {g.usec:.1f} "
                          f"µs/job): groups / flat {g.rate / f.rate:.2f}x", flush=True)
    finally:
        srv.stop()
    for driver in DRIVERS:
        def med(kind: str, field: str, driver: str = driver) -> float:
            return float(statistics.median(getattr(d, field) for d in rows[(driver, kind)]))

        ratios = [g.rate / f.rate for g, f in zip(rows[(driver, "groups")],
                                                  rows[(driver, "flat")], strict=True)]
        print(f"median, {driver}: flat {med('flat', 'rate'):,.0f} jobs/s, groups "
              f"{med('groups', 'rate'):,.0f} jobs/s: "
              f"{med('groups', 'rate') / med('flat', 'rate'):.2f}x (per round "
              f"{', '.join(f'{x:.2f}' for x in ratios)}); native % of claim/ack calls: flat "
              f"{med('flat', 'native'):.1f}, groups {med('groups', 'native'):.1f}; server "
              f"µs/job: flat {med('flat', 'usec'):.1f}, groups {med('groups', 'usec'):.1f}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
