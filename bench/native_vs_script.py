"""Scripts (wire 4) vs the EMQ module (wire 6), side by side in one run.

On one fresh embedded Valkey with the module loaded, each verb runs the same work through
a wire-4 connector (EVALSHA) and a wire-6 connector (EMQ.*), one call per round trip:

- enqueue:  N ``enqueue`` calls without options (``EMQ.ENQUEUE`` at wire 6);
- schedule: N ``enqueue_at`` calls (one job each);
- promote:  M due jobs released by ``promote`` with batch 100, then batch 1,000
            (throughput counted per released job);
- delay:    N jobs in hand sent back to the schedule, one ``delay`` each;
- claim:    M pending jobs leased by ``claim_many`` 50 at a time (the Consumer's batch at
            its default concurrency 50; ``EMQ.CLAIM``), per job;
- ack:      M jobs in hand completed by ``ack_many`` 50 at a time, rows deleted
            (``EMQ.ACKMANY``), per job.

Reported per verb: client-side ops/s (wall clock, round trips included), and the server's
own cost per call, ``usec_per_call`` from ``INFO commandstats`` (``evalsha`` vs
``emq.<verb>``, stats reset before each leg). Each verb runs ``--repeat`` rounds on fresh
keys, the script leg and the native leg back to back in each round (order swapped every
round); the rates and µs shown are each side's best, the ratio ``x`` is the median of the
rounds' native/script rate ratios (so load drift between rounds cancels). For promote the
per-job server cost is usec_per_call / jobs per call. Timings are noisy on a shared
machine; compare within one run.

    .venv/bin/python bench/native_vs_script.py [--n 5000] [--m 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from echomq import Connector, native
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs

FAR = 40_000_000_000_000


REPEAT = 3

Leg = Callable[[str], Callable[[], int]]


def _once(conn: Connector, stat: str, prepare: Leg, q: str) -> tuple[float, float, int]:
    """One run of ``prepare(queue)()`` (setup untimed; the work returns units done):
    (units/s, server usec per call, calls)."""
    work = prepare(q)
    conn.call("CONFIG", "RESETSTAT")
    t0 = time.perf_counter()
    units = work()
    dt = time.perf_counter() - t0
    info = conn.client.info("commandstats").get(f"cmdstat_{stat}", {})
    return units / dt, float(info.get("usec_per_call", 0.0)), int(info.get("calls", 0))


def pair(c4: Connector, c6: Connector, stat6: str, prepare: Callable[[Connector], Leg],
         q: str) -> tuple[tuple[float, float, int], tuple[float, float, int], float]:
    """REPEAT rounds of the script leg and the native leg back to back (the order swapped
    every round, so a change in the machine's load between the two hits each side alike):
    the best of each side, and the median of the per-round rate ratios (native/script)."""
    script: list[tuple[float, float, int]] = []
    native_: list[tuple[float, float, int]] = []
    for i in range(REPEAT):
        order = [(c4, "evalsha", script), (c6, stat6, native_)]
        for conn, stat, into in (order if i % 2 == 0 else order[::-1]):
            into.append(_once(conn, stat, prepare(conn), f"{q}-{stat}-{i}"))
    ratio = statistics.median(n[0] / s[0] for s, n in zip(script, native_, strict=True))

    def best(runs: list[tuple[float, float, int]]) -> tuple[float, float, int]:
        return max(r[0] for r in runs), min(r[1] for r in runs), runs[0][2]

    return best(script), best(native_), ratio


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5_000, help="jobs for schedule and delay")
    ap.add_argument("--m", type=int, default=20_000, help="due jobs per promote leg")
    ap.add_argument("--repeat", type=int, default=REPEAT, help="rounds per verb")
    a = ap.parse_args()
    globals()["REPEAT"] = a.repeat
    rows: list[tuple[str, Any, Any]] = []
    with EmbeddedServer(ephemeral=True, native=False, loadmodules=[native.module_path()]) as srv:
        c4 = Connector.connect(srv.url, wire=4)
        c6 = Connector.connect(srv.url, wire=6)
        print(f"EMQ native vs script, embedded Valkey pid {srv.pid}, module "
              f"{native.module_path().name}, N={a.n}, M={a.m}, {a.repeat} rounds")

        def schedule(conn: Connector) -> Leg:
            def prepare(q: str) -> Callable[[], int]:
                batch = [ids.mint() for _ in range(a.n)]

                def work() -> int:
                    for jid in batch:
                        jobs.enqueue_at(conn, q, jid, b"{}", FAR)
                    return a.n
                return work
            return prepare

        def enqueue(conn: Connector) -> Leg:
            def prepare(q: str) -> Callable[[], int]:
                batch = [ids.mint() for _ in range(a.n)]

                def work() -> int:
                    for jid in batch:
                        jobs.enqueue(conn, q, jid, b"{}")
                    return a.n
                return work
            return prepare

        rows.append(("enqueue", *pair(c4, c6, "emq.enqueue", enqueue, "e")))
        rows.append(("schedule", *pair(c4, c6, "emq.schedule", schedule, "s")))

        for size in (100, 1000):
            def promote(conn: Connector, size: int = size) -> Leg:
                def prepare(q: str) -> Callable[[], int]:
                    due = [ids.mint() for _ in range(a.m)]
                    for i in range(0, a.m, 1000):  # setup, not timed: the same rows on both
                        jobs.schedule_many(c4, q, [(j, b"{}", "at", 1) for j in due[i:i + 1000]])

                    def work() -> int:
                        released = 0
                        while n := jobs.promote(conn, q, size):
                            released += n
                        return released
                    return work
                return prepare

            rows.append((f"promote b={size} (per job)",
                         *pair(c4, c6, "emq.promote", promote, f"p{size}")))

        def delay(conn: Connector) -> Leg:
            def prepare(q: str) -> Callable[[], int]:
                jobs.enqueue_many(c4, q, [(ids.mint(), b"{}") for _ in range(a.n)])
                held = []
                while got := jobs.claim_many(c4, q, 3_600_000, 1000):
                    held += got

                def work() -> int:
                    for c in held:
                        jobs.delay(conn, q, c.id, c.token, FAR, mode="at")
                    return len(held)
                return work
            return prepare

        rows.append(("delay", *pair(c4, c6, "emq.delay", delay, "d")))

        def claim(conn: Connector) -> Leg:
            def prepare(q: str) -> Callable[[], int]:
                for _ in range(0, a.m, 1000):  # setup, not timed: the same rows on both
                    jobs.enqueue_many(c4, q, [(ids.mint(), b"{}") for _ in range(1000)])

                def work() -> int:
                    taken = 0
                    while got := jobs.claim_many(conn, q, 3_600_000, 50):
                        taken += len(got)
                    return taken
                return work
            return prepare

        def ack(conn: Connector) -> Leg:
            def prepare(q: str) -> Callable[[], int]:
                for _ in range(0, a.m, 1000):
                    jobs.enqueue_many(c4, q, [(ids.mint(), b"{}") for _ in range(1000)])
                held = []
                while got := jobs.claim_many(c4, q, 3_600_000, 1000):
                    held += [(c.id, c.token) for c in got]

                def work() -> int:
                    for i in range(0, len(held), 50):
                        jobs.ack_many(conn, q, held[i:i + 50], keep=False)
                    return len(held)
                return work
            return prepare

        rows.append(("claim b=50 (per job)", *pair(c4, c6, "emq.claim", claim, "c")))
        rows.append(("ack b=50 (per job)", *pair(c4, c6, "emq.ackmany", ack, "a")))
        c4.close()
        c6.close()

    head = (f"{'verb':<24}{'script/s':>11}{'native/s':>11}{'x':>7}"
            f"{'script us/call':>16}{'native us/call':>16}{'x':>7}")
    print(head)
    print("-" * len(head))
    for name, (s_rate, s_us, _), (n_rate, n_us, _), ratio in rows:
        cost = f"{s_us / n_us:6.2f}" if n_us else "   n/a"
        print(f"{name:<24}{s_rate:>11,.0f}{n_rate:>11,.0f}{ratio:>7.2f}"
              f"{s_us:>16.2f}{n_us:>16.2f}{cost:>7}")
    print("(rates: the best run of each side; x: the median over rounds of native/script, "
          "each round running both back to back; the promote, claim and ack µs are per call "
          "of 100 / 1,000 / 50 jobs)")
    for name, (_, _, s_calls), (_, _, n_calls), ratio in rows:
        if name.startswith("promote"):
            verdict = "met" if ratio >= 2 else "NOT met"
            print(f"{name}: native {ratio:.2f}x the script per released job "
                  f"({s_calls} vs {n_calls} calls); target 2x {verdict}")


if __name__ == "__main__":
    main()
