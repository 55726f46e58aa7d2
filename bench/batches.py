"""Issue 36's targets on one fresh embedded Valkey: chunks vs single-job calls, a batch's
callback latency and membership overhead, weighted shares, and the group defaults' cost on
an ungrouped queue.

    .venv/bin/python bench/batches.py                 # N = 10,000 jobs per drain
    .venv/bin/python bench/batches.py --n 2000        # a quick run

- chunks: a no-op task drained by the task API's ``Worker`` (concurrency 100), as single-job
  calls and as ``chunk=100``; jobs/s = N over the HOST monotonic time from the first
  handler call's start to the last one's end (the worker's start left out: it would weigh
  on the faster drain more). Target: chunks >= 3x.
- batch: N no-op jobs drained plain, then as one batch (``app.batch(on_complete=...)``),
  ``--repeats`` pairs on the one server (plain and batch alternating, so a load swing hits
  both); a drain's rate is its jobs over the HOST monotonic time from its first job's start
  to its last job's end (the worker's start left out); overhead = 1 - batch rate / plain
  rate per pair, and their median (target <= 10%); beside it the CPU per job (this process's
  and the server's, from the drain's start to the last job's end), which a shared box's load
  moves far less than a rate; the callback's latency = its start minus the last member's
  end (HOST monotonic; target <= 50 ms), and how many times it ran.
- weights: two always-busy groups of weights 3 and 1, 1,000 claims (``claim_many`` by 100):
  the heavy group's share (target 75% +- 10%).
- defaults: ``claim_many`` + ``ack_many`` rounds on an ungrouped queue with and without group
  defaults set on it (the claim never reads them there): the ratio of the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import threading
import time
from typing import Any, NamedTuple

import valkey

from echomq import App
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.worker import Worker
from echomq.verbs import groups, jobs


def _drain(app: App, queue: str, done: Any, timeout: float = 300) -> tuple[float, float]:
    """Run a worker on ``queue`` until ``done()``: when it started and the seconds until
    ``done()`` held (HOST monotonic)."""
    async def main() -> tuple[float, float]:
        worker = Worker(app, [queue], concurrency=100, beat_ms=50, grace_s=5, log_jobs=False)
        stop = asyncio.Event()
        started = time.monotonic()
        running = asyncio.ensure_future(worker.run(stop))
        while not done() and time.monotonic() - started < timeout:
            await asyncio.sleep(0.002)
        took = time.monotonic() - started
        stop.set()
        await running
        return started, took

    return asyncio.run(main())


def _chunk_rate(url: str, n: int, size: int | None) -> float:
    """jobs/s of a no-op task drained one job per call (``size=None``) or in chunks."""
    app = App(url)
    seen = [0]
    span = [0.0, 0.0]  # the first call's start, the last call's end (HOST monotonic)
    lock = threading.Lock()
    queue = f"bench-chunk-{ids.mint()[-8:]}"

    def handled(count: int, began: float) -> None:
        with lock:
            seen[0] += count
            span[0] = span[0] or began
            span[1] = time.monotonic()

    if size is None:
        @app.task(queue=queue, name="one")
        def one(i: int) -> None:
            handled(1, time.monotonic())
        task: Any = one
    else:
        @app.task(queue=queue, name="many", chunk=size,
                  chunk_wait=dt.timedelta(milliseconds=50))
        def many(items: list[Any]) -> None:
            handled(len(items), time.monotonic())
        task = many
    for start in range(0, n, 1000):
        task.enqueue_many([(i,) for i in range(start, min(n, start + 1000))])
    _drain(app, queue, lambda: seen[0] >= n)
    app.close()
    return n / (span[1] - span[0])


def chunks(url: str, n: int) -> tuple[float, float]:
    """(single-job jobs/s, chunk-of-100 jobs/s)."""
    return _chunk_rate(url, n, None), _chunk_rate(url, n, 100)


def chunk_pairs(url: str, n: int, repeats: int) -> list[tuple[float, float]]:
    """``repeats`` runs of ``chunks``, one after the other on the same server."""
    return [chunks(url, n) for _ in range(repeats)]


class Drained(NamedTuple):
    """One drain of ``_batch_run``: jobs/s, the CPU it cost per job (this process's, the
    worker's threads included, plus the server's, in microseconds: a figure a shared box's
    load moves far less than a rate), the callback's latency (ms) and runs."""

    rate: float
    cpu_us: float
    latency_ms: float = 0.0
    runs: int = 0


def batch(url: str, n: int) -> tuple[Drained, Drained]:
    """A plain drain of ``n`` no-op jobs, then the same jobs as one batch."""
    return _batch_run(url, n, False), _batch_run(url, n, True)


def batch_pairs(url: str, n: int, repeats: int) -> list[tuple[Drained, Drained]]:
    """``repeats`` runs of ``batch``, one after the other on the same server."""
    return [batch(url, n) for _ in range(repeats)]


def _server_cpu(url: str) -> float:
    """The server's CPU seconds so far (``INFO cpu``: user + system)."""
    client: Any = valkey.Valkey.from_url(url)
    try:
        got: dict[str, Any] = client.info("cpu")
    finally:
        client.close()
    return float(got["used_cpu_user"]) + float(got["used_cpu_sys"])


def _batch_run(url: str, n: int, batched: bool) -> Drained:
    """``n`` no-op jobs drained, in a batch or not. The CPU is read from the drain's start
    to the last job's end (both sides' startup in it alike; the callback's wait left out)."""
    latency, runs = 0.0, 0
    app = App(url)
    queue = f"bench-batch-{ids.mint()[-8:]}"
    state = {"seen": 0, "first": 0.0, "last": 0.0, "cb": 0.0, "runs": 0, "cpu": 0.0}
    lock = threading.Lock()

    @app.task(queue=queue, name="member")
    def member(i: int) -> None:
        with lock:
            state["seen"] += 1
            state["last"] = time.monotonic()
            if not state["first"]:
                state["first"] = state["last"]
            if state["seen"] == n:
                state["cpu"] = time.process_time() + _server_cpu(url)

    @app.task(queue=queue, name="cb")
    def cb(info: dict[str, Any]) -> None:
        state["cb"] = time.monotonic()
        state["runs"] += 1

    calls = [member.s(i) for i in range(n)]
    if batched:
        with app.batch(on_complete=cb.s()) as b:
            for start in range(0, n, 1000):
                b.add(*calls[start:start + 1000])
    else:
        for start in range(0, n, 1000):
            member.enqueue_many([(i,) for i in range(start, min(n, start + 1000))])
    cpu = time.process_time() + _server_cpu(url)
    if batched:
        # the worker runs on 0.3 s past the callback: a second run would show
        _drain(app, queue, lambda: state["runs"] >= 1 and time.monotonic() - state["cb"] > 0.3)
        latency = (state["cb"] - state["last"]) * 1000
        runs = int(state["runs"])
    else:
        _drain(app, queue, lambda: state["seen"] >= n)
    app.close()
    # first job's start to the last one's end (the callback's wait is reported apart)
    return Drained((n - 1) / (state["last"] - state["first"]),
                   (state["cpu"] - cpu) / n * 1e6, latency, runs)


def weights(url: str) -> float:
    """The heavy group's share of 1,000 claims (weights 3:1, both always busy)."""
    app = App(url)
    conn = app.connector()
    queue = f"bench-w-{ids.mint()[-8:]}"
    for g in ("heavy", "light"):
        jobs.enqueue_many(conn, queue, [(ids.mint(), b"{}", {"group": g}) for _ in range(1000)])
    groups.set_weight(conn, queue, "heavy", 3)
    for _ in range(10):
        jobs.claim_many(conn, queue, 60_000, 100)
    share = groups.stats(conn, queue)["heavy"].active / 1000
    app.close()
    return share


def defaults_cost(url: str, n: int) -> float:
    """Claim+ack rate with group defaults set over the rate without, ungrouped queue."""
    app = App(url)
    conn = app.connector()
    rates = {}
    for with_defaults in (False, True) * 4:
        queue = f"bench-d-{ids.mint()[-8:]}"
        if with_defaults:
            groups.set_defaults(conn, queue, 2, (10, 1000))
        for _ in range(0, n, 1000):
            jobs.enqueue_many(conn, queue, [(ids.mint(), b"{}") for _ in range(1000)])
        started = time.monotonic()
        while True:
            got = jobs.claim_many(conn, queue, 60_000, 100)
            if not got:
                break
            jobs.ack_many(conn, queue, [(c.id, c.token) for c in got])
        rates.setdefault(with_defaults, []).append(n / (time.monotonic() - started))
    app.close()
    return statistics.median(rates[True]) / statistics.median(rates[False])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3,
                    help="single/chunk and plain/batch pairs (default 3)")
    args = ap.parse_args()
    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    try:
        print(f"n={args.n}  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        ratios = []
        for single, chunked in chunk_pairs(srv.url, args.n, args.repeats):
            ratios.append(chunked / single)
            print(f"chunks:   single {single:,.0f} jobs/s, chunk=100 {chunked:,.0f} jobs/s: "
                  f"{ratios[-1]:.1f}x")
        print(f"chunks:   median {statistics.median(ratios):.1f}x of {len(ratios)} pairs "
              f"(target >= 3x)")
        overheads, costs = [], []
        for plain, member in batch_pairs(srv.url, args.n, args.repeats):
            overheads.append(100 * (1 - member.rate / plain.rate))
            costs.append(100 * (member.cpu_us / plain.cpu_us - 1))
            print(f"batch:    plain {plain.rate:,.0f} jobs/s, in a batch {member.rate:,.0f} "
                  f"jobs/s: overhead {overheads[-1]:.1f}%; CPU per job {plain.cpu_us:.0f} vs "
                  f"{member.cpu_us:.0f} us: {costs[-1]:+.1f}%; callback ran {member.runs}x, "
                  f"{member.latency_ms:.1f} ms after the last member ended (target <= 50 ms)")
        print(f"batch:    median overhead {statistics.median(overheads):.1f}% of the rate, "
              f"{statistics.median(costs):+.1f}% of the CPU per job, of {len(overheads)} "
              f"pairs (target <= 10%)")
        share = weights(srv.url)
        print(f"weights:  heavy (3) took {100 * share:.1f}% of 1,000 claims "
              f"(target 75% +- 7.5)")
        ratio = defaults_cost(srv.url, min(args.n, 5000))
        print(f"defaults: ungrouped claim+ack rate with/without group defaults: {ratio:.2f}")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
