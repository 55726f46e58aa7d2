"""Bench: the scripted transitions on a fresh embedded Valkey.

Times, for N jobs (default 20,000): scheduling one call at a time, scheduling pipelined in
batches, promoting them all (batch 1,000), claiming them (one at a time and in batches of
100) and acking. Prints jobs/s per step. Wire 4 (scripts) unless --wire 6.

    .venv/bin/python bench/core_verbs.py [--n 20000] [--wire 4|6]

Timings are wall-clock on whatever else the machine is doing: noisy; compare within a run.
"""

from __future__ import annotations

import argparse
import time

from echomq import Connector
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs


def timed(label: str, n: int, fn) -> None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    print(f"{label:<44} {n:>7} jobs {dt:8.3f} s {n / dt:>10,.0f} jobs/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--wire", type=int, default=4, choices=(4, 6))
    ap.add_argument("--batch", type=int, default=500, help="pipeline size for the bulk steps")
    a = ap.parse_args()
    n = a.n
    with EmbeddedServer(ephemeral=True, native=a.wire == 6) as srv:
        conn = Connector.connect(srv.url, wire=a.wire)
        now = jobs.server_now_ms(conn)
        assert isinstance(now, int)
        one = [ids.mint() for _ in range(n)]
        bulk = [ids.mint() for _ in range(n)]
        print(f"EchoMQ core verbs, wire {a.wire}, N={n}, embedded Valkey pid {srv.pid}")

        def schedule_one() -> None:
            for jid in one:
                jobs.enqueue_at(conn, "one", jid, b"{}", now - 1)

        def schedule_bulk() -> None:
            for i in range(0, n, a.batch):
                chunk = bulk[i:i + a.batch]
                jobs.schedule_many(conn, "bulk", [(j, b"{}", "at", now - 1) for j in chunk])

        def promote(queue: str) -> None:
            while jobs.promote(conn, queue, 1000):
                pass

        def claim_ack_one() -> None:
            while (c := jobs.claim(conn, "one", 30_000)) is not None:
                jobs.ack(conn, "one", c.id, c.token, keep=False)

        def claim_ack_batched() -> None:
            while got := jobs.claim_many(conn, "bulk", 30_000, 100):
                assert isinstance(got, list)
                jobs.ack_many(conn, "bulk", [(c.id, c.token) for c in got], keep=False)

        timed("schedule, one call per job", n, schedule_one)
        timed(f"schedule_many (bulk script, {a.batch} per call)", n, schedule_bulk)
        timed("promote, batch 1000", n, lambda: promote("one"))
        timed("promote, batch 1000 (second queue)", n, lambda: promote("bulk"))
        timed("claim + ack, one call each per job", n, claim_ack_one)
        timed("claim_many x100 + ack_many", n, claim_ack_batched)
        conn.close()


if __name__ == "__main__":
    main()
