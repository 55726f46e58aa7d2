"""Bench: a 1 x N fan-out flow against N plain jobs, on a fresh embedded Valkey.

Flow: admit one parent (queue ``parents``) with N children (queue ``kids``) in one
``flows.admit`` (one round trip per level), run the children (``claim_many`` + ``ack_many``
in batches, each ack also writing the child's flow outbox entry), carry the outbox to the
parent's slot (``flows.carry`` in batches: the carry leg's call, run back to back here), then
claim and ack the released parent. Plain: ``enqueue_many`` N jobs, then the same
claim/ack loop. Prints each phase's time and rate and the ratio flow / plain; the carry
rate is children counted per second.

    .venv/bin/python bench/flows.py [--n 10000] [--batch 500] [--url valkey://...]

Timings are wall-clock on whatever else the machine is doing: noisy; compare within a run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from echomq import Connector
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import flows, jobs
from echomq.verbs.flows import Node


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_all(conn: Connector, queue: str, batch: int) -> int:
    n = 0
    while got := jobs.claim_many(conn, queue, 60_000, batch):
        jobs.ack_many(conn, queue, [(c.id, c.token) for c in got], False)
        n += len(got)
    return n


def bench(conn: Connector, n: int, batch: int) -> list[tuple[str, float, float, int]]:
    tag = ids.mint()[-6:].lower()
    pq, cq, plain = f"parents-{tag}", f"kids-{tag}", f"plain-{tag}"
    root = Node(pq, ids.mint(), b'{"task":"report"}', children=tuple(
        Node(cq, ids.mint(), b'{"task":"fetch"}') for _ in range(n)))

    t_admit, _ = timed(lambda: flows.admit(conn, root))
    t_run, ran = timed(lambda: run_all(conn, cq, batch))
    assert ran == n

    def carry() -> flows.Carried:
        total = flows.Carried()
        while (got := flows.carry(conn, cq, batch)).read:
            total = total.plus(got)
        return total

    t_carry, carried = timed(carry)
    assert carried.counted == n and carried.released == 1, carried
    t_parent, last = timed(lambda: run_all(conn, pq, batch))
    assert last == 1

    bodies = [(ids.mint(), b'{"task":"fetch"}') for _ in range(n)]

    def enqueue() -> None:
        for i in range(0, n, batch):
            jobs.enqueue_many(conn, plain, bodies[i:i + batch])

    t_enq, _ = timed(enqueue)
    t_prun, pran = timed(lambda: run_all(conn, plain, batch))
    assert pran == n
    return [
        ("admit / enqueue", t_admit, t_enq, n),
        ("run (claim + ack)", t_run, t_prun, n),
        ("carry to the parent", t_carry, 0.0, n),
        ("release + run the parent", t_parent, 0.0, 1),
        ("total", t_admit + t_run + t_carry + t_parent, t_enq + t_prun, n),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--url", default=None, help="a server to use (default: a fresh embedded one)")
    a = ap.parse_args()

    def report(conn: Connector, where: str) -> None:
        print(f"EchoMQ flows: 1 x {a.n:,} fan-out vs {a.n:,} plain jobs, batch {a.batch}, {where}")
        rows = bench(conn, a.n, a.batch)
        print(f"{'phase':<26} {'flow s':>9} {'plain s':>9} {'flow/plain':>10} {'flow jobs/s':>12}")
        for label, tf, tp, count in rows:
            ratio = f"{tf / tp:10.2f}" if tp else f"{'-':>10}"
            plain = f"{tp:9.3f}" if tp else f"{'-':>9}"
            print(f"{label:<26} {tf:9.3f} {plain} {ratio} {count / tf:12,.0f}")
        carry = rows[2]
        print(f"carry rate: {carry[3] / carry[1]:,.0f} children/s")

    if a.url:
        conn = Connector.connect(a.url)
        report(conn, a.url)
        conn.close()
        return
    with EmbeddedServer(ephemeral=True) as srv:
        conn = Connector.connect(srv.url)
        report(conn, f"embedded Valkey pid {srv.pid}")
        conn.close()


if __name__ == "__main__":
    main()
