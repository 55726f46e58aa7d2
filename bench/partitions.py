"""Drain throughput of one queue split into 1, 3 and 8 partitions on a 3-primary cluster.

One queue lives on one slot, so one primary serves all of it; a partitioned queue
(``@app.task(queue=..., partitions=N)``) spreads its partitions' tags over the primaries.
For each N: a fresh loopback cluster (3 primaries, no replicas), ``--n`` no-op jobs enqueued
round robin over the partitions, then ``--workers`` ``echomq worker`` processes drain them
(total concurrency per worker ``--concurrency``, split evenly over the partitions, so every
row runs the same number of slots). Throughput is jobs / (last completion - first
completion), read from the completed sets' SERVER-clock scores (the app keeps completed
rows), so process start-up is not counted. "busiest primary" is the CPU the most loaded
primary spent over that span (INFO cpu): near 100 % means one primary is the bound that
partitions lift.

    .venv/bin/python bench/partitions.py [--n 20000] [--workers 3] [--concurrency 48]
        [--repeat 3]

With ``--repeat R`` every row is measured R times, the partition counts interleaved (so
drift from other load hits them alike); the table shows medians.

Every primary, worker and this script share the machine's cores: on a small machine the
ratio shows how far partitioning lifts the one-primary bound there, not on a real fleet.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from echomq import Connector
from echomq.core import ids, keyspace, partitions
from echomq.core.payload import encode
from echomq.embedded.cluster import LocalCluster
from echomq.verbs import jobs

APP = textwrap.dedent("""
    import os
    from echomq.tasks.app import App

    app = App(keep_completed=10**7)

    @app.task(queue=os.environ["BENCH_QUEUE"], name="bench.noop",
              partitions=int(os.environ["BENCH_PARTITIONS"]))
    async def noop(i):
        return None
""")


def run(parts: int, n: int, workers: int, concurrency: int, folder: str) -> dict[str, float]:
    queue = f"bench{parts}"
    names = partitions.names(queue, parts)
    with LocalCluster(masters=3, replicas=0) as cl:
        conn = Connector.connect(cl.url)
        owners = {cl.owner(keyspace.queue_key(q, "pending")).port for q in names}
        body = encode("bench.noop", [0])
        for i, q in enumerate(names):
            share = n // parts + (1 if i < n % parts else 0)
            for lo in range(0, share, 1000):
                jobs.enqueue_many(conn, q, [(ids.mint(), body)
                                            for _ in range(min(1000, share - lo))])
        cpu0 = {n.port: _cpu(cl, n) for n in cl.primaries()}
        env = {**os.environ, "ECHOMQ_URL": cl.url, "BENCH_QUEUE": queue,
               "BENCH_PARTITIONS": str(parts),
               "PYTHONPATH": os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")]))}
        per = max(1, concurrency // parts)
        procs = [subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "worker", "benchapp:app", "--concurrency",
             str(per), "--grace", "2"], cwd=folder, env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL) for _ in range(workers)]
        try:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                left = sum(jobs.counts(conn, q)["pending"] + jobs.counts(conn, q)["active"]
                           for q in names)
                if left == 0:
                    break
                if all(p.poll() is not None for p in procs):
                    raise SystemExit("every worker process exited before the drain ended")
                time.sleep(0.1)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(30)
        cpu = max(_cpu(cl, n) - cpu0[n.port] for n in cl.primaries())
        first, last, done = float("inf"), 0.0, 0
        for q in names:
            key = keyspace.queue_key(q, "completed")
            lo = conn.call("ZRANGE", key, 0, 0, "WITHSCORES")
            hi = conn.call("ZRANGE", key, -1, -1, "WITHSCORES")
            done += int(conn.call("ZCARD", key))
            if lo:
                first, last = min(first, float(lo[1])), max(last, float(hi[1]))
        conn.close()
    span = max(1.0, last - first) / 1000
    return {"done": done, "seconds": span, "rate": done / span, "primaries": len(owners),
            "cpu": cpu / span}


def _cpu(cl: LocalCluster, node: object) -> float:
    """A primary's CPU seconds so far (user + sys, from INFO cpu)."""
    info = cl.client(node).info("cpu")  # type: ignore[arg-type]
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> None:
    # a SIGTERM unwinds the with-blocks, so the loopback cluster's nodes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=48)
    parser.add_argument("--partitions", default="1,3,8")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="echomq-bench-")
    with open(os.path.join(folder, "benchapp.py"), "w") as f:
        f.write(APP)
    print(f"{args.n} no-op jobs, {args.workers} worker processes, "
          f"{args.concurrency} slots per worker, 3 primaries; os.cpu_count()={os.cpu_count()}; "
          f"medians of {args.repeat}")
    print(f"{'partitions':>10} {'primaries used':>15} {'jobs':>7} {'drain s':>8} "
          f"{'jobs/s':>8} {'vs 1':>6} {'busiest primary CPU':>20}")
    counts = [int(p) for p in args.partitions.split(",")]
    runs: dict[int, list[dict[str, float]]] = {p: [] for p in counts}
    for _ in range(max(1, args.repeat)):
        for parts in counts:
            runs[parts].append(run(parts, args.n, args.workers, args.concurrency, folder))
    base = None
    for parts in counts:
        r = {k: statistics.median(x[k] for x in runs[parts]) for k in runs[parts][0]}
        base = base or r["rate"]
        print(f"{parts:>10} {int(r['primaries']):>15} {int(r['done']):>7} "
              f"{r['seconds']:>8.2f} {r['rate']:>8.0f} {r['rate'] / base:>5.2f}x "
              f"{r['cpu']:>19.0%}", flush=True)


if __name__ == "__main__":
    main()
