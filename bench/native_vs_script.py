"""Scripts (wire 4) vs the EMQ module (wire 6), side by side in one run.

On one fresh embedded Valkey with the module loaded, each verb runs the same work through
a wire-4 connector (EVALSHA) and a wire-6 connector (EMQ.*), one call per round trip:

- schedule: N ``enqueue_at`` calls (one job each);
- promote:  M due jobs released by ``promote`` with batch 100, then batch 1,000
            (throughput counted per released job);
- delay:    N jobs in hand sent back to the schedule, one ``delay`` each.

Reported per verb: client-side ops/s (wall clock, round trips included), and the server's
own cost per call, ``usec_per_call`` from ``INFO commandstats`` (``evalsha`` vs
``emq.<verb>``, stats reset before each leg), with native/script ratios. Each leg runs
three times on fresh keys and the best run counts (the machine is shared). For promote the
per-job server cost is usec_per_call / jobs per call. Timings are noisy on a shared machine;
compare within one run.

    .venv/bin/python bench/native_vs_script.py [--n 5000] [--m 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from echomq import Connector, ids, jobs, native
from echomq.server import EmbeddedServer

FAR = 40_000_000_000_000


REPEAT = 3


def leg(
    conn: Connector, stat: str, prepare: Callable[[str], Callable[[], int]], q: str
) -> tuple[float, float, int]:
    """Best of REPEAT runs of ``prepare(queue)()`` (setup untimed; the work returns units
    done): (units/s, server usec per call, calls), taking the fastest run of each."""
    best = (0.0, float("inf"), 0)
    for i in range(REPEAT):
        work = prepare(f"{q}-{i}")
        conn.call("CONFIG", "RESETSTAT")
        t0 = time.perf_counter()
        units = work()
        dt = time.perf_counter() - t0
        info = conn.client.info("commandstats").get(f"cmdstat_{stat}", {})
        us = float(info.get("usec_per_call", 0.0))
        best = (max(best[0], units / dt), min(best[1], us), int(info.get("calls", 0)))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5_000, help="jobs for schedule and delay")
    ap.add_argument("--m", type=int, default=20_000, help="due jobs per promote leg")
    ap.add_argument("--repeat", type=int, default=REPEAT, help="runs per leg (best counts)")
    a = ap.parse_args()
    globals()["REPEAT"] = a.repeat
    rows: list[tuple[str, Any, Any]] = []
    with EmbeddedServer(ephemeral=True, native=False, loadmodules=[native.module_path()]) as srv:
        c4 = Connector.connect(srv.url, wire=4)
        c6 = Connector.connect(srv.url, wire=6)
        print(f"EMQ native vs script, embedded Valkey pid {srv.pid}, module "
              f"{native.module_path().name}, N={a.n}, M={a.m}, best of {a.repeat}")

        def schedule(conn: Connector, q: str) -> Callable[[], int]:
            batch = [ids.mint() for _ in range(a.n)]

            def work() -> int:
                for jid in batch:
                    jobs.enqueue_at(conn, q, jid, b"{}", FAR)
                return a.n
            return work

        rows.append(("schedule", leg(c4, "evalsha", lambda q: schedule(c4, q), "s4"),
                     leg(c6, "emq.schedule", lambda q: schedule(c6, q), "s6")))

        for size in (100, 1000):
            def promote(conn: Connector, q: str, size: int = size) -> Callable[[], int]:
                due = [ids.mint() for _ in range(a.m)]
                for i in range(0, a.m, 1000):  # setup, not timed: the same rows on both
                    jobs.schedule_many(c4, q, [(j, b"{}", "at", 1) for j in due[i:i + 1000]])

                def work() -> int:
                    released = 0
                    while n := jobs.promote(conn, q, size):
                        released += n
                    return released
                return work

            rows.append((f"promote b={size} (per job)",
                         leg(c4, "evalsha", lambda q: promote(c4, q), f"p4-{size}"),
                         leg(c6, "emq.promote", lambda q: promote(c6, q), f"p6-{size}")))

        def delay(conn: Connector, q: str) -> Callable[[], int]:
            jobs.enqueue_many(c4, q, [(ids.mint(), b"{}") for _ in range(a.n)])
            held = []
            while got := jobs.claim_many(c4, q, 3_600_000, 1000):
                held += got

            def work() -> int:
                for c in held:
                    jobs.delay(conn, q, c.id, c.token, FAR, mode="at")
                return len(held)
            return work

        rows.append(("delay", leg(c4, "evalsha", lambda q: delay(c4, q), "d4"),
                     leg(c6, "emq.delay", lambda q: delay(c6, q), "d6")))
        c4.close()
        c6.close()

    head = (f"{'verb':<24}{'script/s':>11}{'native/s':>11}{'x':>7}"
            f"{'script us/call':>16}{'native us/call':>16}{'x':>7}")
    print(head)
    print("-" * len(head))
    for name, (s_rate, s_us, _), (n_rate, n_us, _) in rows:
        cost = f"{s_us / n_us:6.2f}" if n_us else "   n/a"
        print(f"{name:<24}{s_rate:>11,.0f}{n_rate:>11,.0f}{n_rate / s_rate:>7.2f}"
              f"{s_us:>16.2f}{n_us:>16.2f}{cost:>7}")
    for name, (s_rate, _, s_calls), (n_rate, _, n_calls) in rows:
        if name.startswith("promote"):
            verdict = "met" if n_rate >= 2 * s_rate else "NOT met"
            print(f"{name}: native {n_rate / s_rate:.2f}x the script per released job "
                  f"({s_calls} vs {n_calls} calls); target 2x {verdict}")


if __name__ == "__main__":
    main()
