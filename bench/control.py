"""Bench of the job controls (issues 12 and 13) on a fresh embedded Valkey.

Prints one table: claim+ack throughput with priorities in use vs without, cancel of
scheduled jobs, claim throughput over 1,000 groups vs a flat queue, and under a queue rate
limit that never binds, each with its ratio to the plain flat queue. Each claim row drains N
jobs with ``claim_many`` (100 at a time) and the acks of that batch in the same round trip
(``jobs.ack_and_claim``), as the Consumer does; each measurement runs ``--repeat`` times on a
fresh queue, interleaved, and the table shows the median.

    .venv/bin/python bench/control.py [--n 20000] [--repeat 3] [--wire 4|6]

At wire 6 each claim row also shows the share of its claim calls and ack batches the native
hot path served (``EMQ.CLAIM`` and ``EMQ.ACKMANY`` calls that did not hand back, from ``INFO
commandstats`` over the drain, over the calls the drain made): the rest ran their scripts,
after a hand-back (``EMQSTATE ... not native``) or straight away while the queue's last
hand-back is recent (``connectors.memory``). Rows for unique keys and kept results
(``notify``) stand beside priorities, groups and rates.

Timings are wall-clock on whatever else the machine is doing: compare within a run.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from echomq import Connector
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import groups, jobs

LEASE = 60_000


def fresh() -> str:
    return "b" + uuid.uuid4().hex[:10]


#: the claim calls and ack batches the last drain sent
SENT = {"emq.claim": 0, "emq.ackmany": 0}


def drain(conn: Connector, q: str) -> int:
    """Claim and ack everything on ``q`` (acks ride with the next claim); jobs done."""
    done = 0
    held: list[Any] = []
    SENT.update({"emq.claim": 0, "emq.ackmany": 0})
    while True:
        _, got = jobs.ack_and_claim(conn, q, [(c.id, c.token) for c in held], LEASE, 100,
                                    keep=False)
        SENT["emq.claim"] += 1
        SENT["emq.ackmany"] += 1 if held else 0
        done += len(held)
        held = got
        if not held:
            return done


def admit(conn: Connector, q: str, n: int, opts: Callable[[int], dict[str, Any] | None]) -> None:
    for i in range(0, n, 1000):
        items: list[tuple[Any, ...]] = []
        for j in range(i, min(i + 1000, n)):
            o = opts(j)
            items.append((ids.mint(), b"{}", o) if o else (ids.mint(), b"{}"))
        jobs.enqueue_many(conn, q, items)


HOT = ("emq.claim", "emq.ackmany")
#: per row label: the shares of claims and ack batches served natively in its last run
NATIVE: dict[str, tuple[float, float]] = {}


def hot_calls(conn: Connector) -> dict[str, tuple[int, int]]:
    stats = conn.call("INFO", "commandstats")
    return {n: (int(stats.get(f"cmdstat_{n}", {}).get("calls", 0)),
                int(stats.get(f"cmdstat_{n}", {}).get("failed_calls", 0))) for n in HOT}


def claim_rate(conn: Connector, n: int, opts: Callable[[int], dict[str, Any] | None],
               setup: Callable[[str], None] = lambda q: None, label: str = "") -> float:
    q = fresh()
    setup(q)
    admit(conn, q, n, opts)
    before = hot_calls(conn)
    t0 = time.perf_counter()
    assert drain(conn, q) == n
    rate = n / (time.perf_counter() - t0)
    after = hot_calls(conn)
    served = [((after[n][0] - before[n][0]) - (after[n][1] - before[n][1])) / max(1, SENT[n])
              for n in HOT]
    NATIVE[label] = (served[0], served[1])
    return rate


def cancel_rate(conn: Connector, n: int, pipelined: bool) -> float:
    q = fresh()
    minted = [ids.mint() for _ in range(n)]
    for i in range(0, n, 1000):
        jobs.schedule_many(conn, q, [(j, b"{}", "in", 3_600_000) for j in minted[i:i + 1000]])
    t0 = time.perf_counter()
    if pipelined:
        # 1,000 cancels per round trip (jobs.cancel_many): what a bulk action sends
        for i in range(0, n, 1000):
            assert set(jobs.cancel_many(conn, q, minted[i:i + 1000])) == {"cancelled"}
    else:
        for j in minted:
            assert jobs.cancel(conn, q, j) == "cancelled"
    rate = n / (time.perf_counter() - t0)
    assert jobs.counts(conn, q)["cancelled"] == n
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--cancel-n", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wire", type=int, default=4, choices=(4, 6))
    a = ap.parse_args()
    n = a.n
    with EmbeddedServer(ephemeral=True, native=a.wire == 6) as srv:
        conn = Connector.connect(srv.url, wire=a.wire)
        specs: dict[str, tuple[Callable[[int], dict[str, Any] | None],
                               Callable[[str], None]]] = {
            "claim+ack, flat (baseline)": (lambda i: None, lambda q: None),
            "claim+ack, priorities 0..9 in use": (lambda i: {"priority": i % 10}, lambda q: None),
            "claim+ack, a unique key each": (lambda i: {"unique": f"u{i}"}, lambda q: None),
            "claim+ack, kept results (notify)": (lambda i: {"notify_ms": 60_000},
                                                 lambda q: None),
            "claim+ack, 1,000 groups": (lambda i: {"group": f"t{i % 1000}"}, lambda q: None),
            "claim+ack, flat, queue rate not binding": (
                lambda i: None, lambda q: jobs.set_rate(conn, q, 10**9, 1_000)),
            "claim+ack, 1,000 groups, group rates not binding": (
                lambda i: {"group": f"t{i % 1000}"},
                lambda q: [groups.set_rate(conn, q, f"t{g}", 10**9, 1_000) for g in range(1000)]
                and None),
        }
        rows: dict[str, Callable[[], float]] = {
            label: (lambda o=o, su=su, label=label: claim_rate(conn, n, o, su, label))
            for label, (o, su) in specs.items()}
        claim_rate(conn, min(n, 5_000), lambda i: None)  # warm-up: scripts loaded, pages hot
        got: dict[str, list[float]] = {k: [] for k in rows}
        for _ in range(a.repeat):
            for label, fn in rows.items():
                got[label].append(fn())
        cancels = {
            f"cancel {a.cancel_n:,} scheduled, one call each": [
                cancel_rate(conn, a.cancel_n, False) for _ in range(a.repeat)],
            f"cancel {a.cancel_n:,} scheduled, 1,000 per round trip": [
                cancel_rate(conn, a.cancel_n, True) for _ in range(a.repeat)],
        }
        base = statistics.median(got["claim+ack, flat (baseline)"])
        print(f"EchoMQ job controls, wire {a.wire}, N={n:,}, median of {a.repeat}, "
              f"embedded Valkey pid {srv.pid}")
        print(f"| {'measurement':<52} | {'jobs/s':>10} | {'vs flat':>7} | "
              f"{'native: claims / acks':>26} |")
        print(f"|{'-' * 54}|{'-' * 12}|{'-' * 9}|{'-' * 28}|")
        for label, vals in got.items():
            med = statistics.median(vals)
            handed = (f"{NATIVE[label][0]:.0%} / {NATIVE[label][1]:.0%}" if a.wire == 6
                      else "-")
            print(f"| {label:<52} | {med:>10,.0f} | {med / base:>6.2f}x | {handed:>26} |")
        for label, vals in cancels.items():
            print(f"| {label:<52} | {statistics.median(vals):>10,.0f} | {'':>7} | {'':>26} |")
        conn.close()


if __name__ == "__main__":
    main()
