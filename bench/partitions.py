"""Drain throughput of one queue split into 1, 3 and 8 partitions on a loopback cluster, and
the server's work per job on each primary: the scale-out model.

One queue lives on one slot, so one primary serves all of it; a partitioned queue
(``@app.task(queue=..., partitions=N)``) spreads its partitions' tags over the primaries.
For each cluster size (``--masters``, default 3 and 6) and each N: a fresh loopback cluster
(no replicas), ``--n`` no-op jobs enqueued round robin over the partitions (paused), then
``--workers`` ``echomq worker`` processes start, each with ``--concurrency`` slots for the
queue (one pool for all its partitions); once every one has registered the partitions are
resumed and the clock starts. Throughput is jobs / (last completion - the resume), on the
SERVER clock (the completed sets' scores: the app keeps completed rows), so neither process
start-up nor the workers' stagger in coming up is counted. Each round prints its own
ratios (3 partitions against 1 in the same round) and where the partitions' slots landed
("2+1+0": two on one primary, one on another).

The model: per primary, the server time its transitions spent over the drain (``INFO
commandstats``, reset before it: the scripts' and the module commands' µs, which hold the
commands they run) divided by all the jobs drained: "µs/job" is what the cluster as a whole
spends per job, and "busiest share" is the most loaded primary's part of it. One primary
serves one partition's every job, so with P partitions spread by hash over M primaries the
busiest carries (its partitions) / P of the work ("expected": from where the tags
landed), and a queue's ceiling is one core divided by (busiest share x µs/job).

    .venv/bin/python bench/partitions.py [--n 20000] [--workers 3] [--concurrency 48]
        [--masters 3,6] [--partitions 1,3,8] [--repeat 3]

With ``--repeat R`` every row is measured R times, the rows interleaved (so drift from
other load hits them alike); the table shows medians.

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
from collections import Counter

from echomq import Connector
from echomq.core import ids, keyspace, partitions
from echomq.core.payload import encode
from echomq.embedded.cluster import LocalCluster
from echomq.verbs import jobs, workers

APP = textwrap.dedent("""
    import os
    from echomq.tasks.app import App

    app = App(keep_completed=10**7)

    @app.task(queue=os.environ["BENCH_QUEUE"], name="bench.noop",
              partitions=int(os.environ["BENCH_PARTITIONS"]))
    async def noop(i):
        return None
""")


def run(masters: int, parts: int, n: int, workers: int, concurrency: int,
        folder: str) -> dict[str, float]:
    queue = f"bench{parts}"
    names = partitions.names(queue, parts)
    with LocalCluster(masters=masters, replicas=0) as cl:
        conn = Connector.connect(cl.url)
        owner = {q: cl.owner(keyspace.queue_key(q, "pending")).port for q in names}
        body = encode("bench.noop", [0])
        for i, q in enumerate(names):
            share = n // parts + (1 if i < n % parts else 0)
            for lo in range(0, share, 1000):
                jobs.enqueue_many(conn, q, [(ids.mint(), body)
                                            for _ in range(min(1000, share - lo))])
        for q in names:  # held until every worker is up (see _ready)
            jobs.pause(conn, q)
        primaries = list(cl.primaries())
        env = {**os.environ, "ECHOMQ_URL": cl.url, "BENCH_QUEUE": queue,
               "BENCH_PARTITIONS": str(parts),
               "PYTHONPATH": os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")]))}
        procs = [subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "worker", "benchapp:app", "--concurrency",
             str(concurrency), "--grace", "2"], cwd=folder, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        try:
            _ready(conn, procs)
            for node in primaries:
                cl.client(node).config_resetstat()
            cpu0 = {node.port: _cpu(cl, node) for node in primaries}
            wcpu0 = _proc_cpu(procs)
            secs, micros = conn.call("TIME")
            start = int(secs) * 1000 + int(micros) / 1000  # SERVER ms, as the completions
            for q in names:
                jobs.resume(conn, q)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                left = sum(jobs.counts(conn, q)["pending"] + jobs.counts(conn, q)["active"]
                           for q in names)
                if left == 0:
                    break
                if all(p.poll() is not None for p in procs):
                    raise SystemExit("every worker process exited before the drain ended")
                time.sleep(0.1)
            # the server's work per primary, read before the workers' shutdown adds to it
            usec = {node.port: _usec(cl, node) for node in primaries}
            cpu = {node.port: _cpu(cl, node) - cpu0[node.port] for node in primaries}
            wcpu = _proc_cpu(procs) - wcpu0
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(30)
        last, done = 0.0, 0
        for q in names:
            key = keyspace.queue_key(q, "completed")
            hi = conn.call("ZRANGE", key, -1, -1, "WITHSCORES")
            done += int(conn.call("ZCARD", key))
            if hi:
                last = max(last, float(hi[1]))
        conn.close()
    span = max(1.0, last - start) / 1000
    total = sum(usec.values())
    held = Counter(owner.values())
    placed = "+".join(str(held.get(node.port, 0)) for node in primaries)
    used = wcpu + sum(cpu.values())
    print(f"  masters {masters}, {parts} partition(s) on primaries {placed}: "
          f"{done / span:,.0f} jobs/s; {done / max(used, 1e-9):,.0f} jobs per CPU second "
          f"(workers {wcpu:.1f} s + primaries {sum(cpu.values()):.1f} s)", flush=True)
    return {"done": done, "seconds": span, "rate": done / span, "primaries": len(held),
            "usec_job": total / max(1, done),
            "busiest_share": max(usec.values()) / total if total else 0.0,
            "expected_share": max(held.values()) / parts,
            "busiest_cpu": max(cpu.values()) / span, "per_cpu_s": done / max(used, 1e-9)}


def _ready(conn: Connector, procs: list[subprocess.Popen[bytes]]) -> None:
    """Every worker process registered, then one beat more so each consumer waits on its
    partitions' wake lists: the drain starts (the partitions resumed) with all of them in
    place. Started together, the workers come up seconds apart on a loaded 2-core box
    (interpreter and imports), and a clock started at the first completion measured that
    stagger, a different one per run, as much as the drain."""
    t0 = time.monotonic()
    up: list[float] = []
    while len(up) < len(procs):
        if time.monotonic() - t0 > 120 or any(p.poll() is not None for p in procs):
            raise SystemExit("the worker processes did not all register within 120 s")
        up += [time.monotonic() - t0] * (len(workers.live(conn)) - len(up))
        time.sleep(0.05)
    print(f"  workers registered {', '.join(f'{u:.1f}' for u in up)} s after their start",
          flush=True)
    time.sleep(0.5)


def _proc_cpu(procs: list[subprocess.Popen[bytes]]) -> float:
    """The worker processes' CPU seconds so far (user + sys, /proc/<pid>/stat)."""
    total = 0
    for p in procs:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def _cpu(cl: LocalCluster, node: object) -> float:
    """A primary's CPU seconds so far (user + sys, from INFO cpu)."""
    info = cl.client(node).info("cpu")  # type: ignore[arg-type]
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _usec(cl: LocalCluster, node: object) -> float:
    """The µs a primary spent in the transitions since the reset (INFO commandstats: the
    scripts and the module's commands, whose time holds the commands they run; the
    bench's own reads are left out)."""
    stats = cl.client(node).info("commandstats")  # type: ignore[arg-type]
    return sum(float(v["usec"]) for k, v in stats.items()
               if k in ("cmdstat_evalsha", "cmdstat_eval") or k.startswith("cmdstat_emq"))


def main() -> None:
    # a SIGTERM unwinds the with-blocks, so the loopback cluster's nodes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=48)
    parser.add_argument("--masters", default="3,6")
    parser.add_argument("--partitions", default="1,3,8")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="echomq-bench-")
    with open(os.path.join(folder, "benchapp.py"), "w") as f:
        f.write(APP)
    print(f"{args.n} no-op jobs, {args.workers} worker processes, {args.concurrency} slots "
          f"per worker, os.cpu_count()={os.cpu_count()}; medians of {args.repeat}")
    print(f"{'masters':>7} {'partitions':>10} {'primaries used':>15} {'jobs/s':>8} "
          f"{'vs 1':>6} {'server us/job':>14} {'busiest share':>14} {'expected':>9} "
          f"{'busiest CPU':>12}")
    sizes = [int(m) for m in args.masters.split(",")]
    counts = [int(p) for p in args.partitions.split(",")]
    runs: dict[tuple[int, int], list[dict[str, float]]] = {}
    for rnd in range(max(1, args.repeat)):
        for m in sizes:
            # the order turns every round, so a burst of load from elsewhere does not
            # always land on the same row
            for parts in counts if rnd % 2 == 0 else counts[::-1]:
                runs.setdefault((m, parts), []).append(
                    run(m, parts, args.n, args.workers, args.concurrency, folder))
            one = runs[(m, counts[0])][-1]["rate"]
            eff = runs[(m, counts[0])][-1]["per_cpu_s"]
            print(f"round {rnd + 1}, {m} masters: jobs/s " + ", ".join(
                f"{p}: {runs[(m, p)][-1]['rate'] / one:.2f}x" for p in counts)
                + f" of {counts[0]}; jobs per CPU second " + ", ".join(
                f"{p}: {runs[(m, p)][-1]['per_cpu_s'] / eff:.2f}x" for p in counts)
                + f" (load {os.getloadavg()[0]:.1f})", flush=True)
    for m in sizes:
        base = None
        for parts in counts:
            got = runs[(m, parts)]
            r = {k: statistics.median(x[k] for x in got) for k in got[0]}
            base = base or r["rate"]
            print(f"{m:>7} {parts:>10} {int(r['primaries']):>15} {r['rate']:>8.0f} "
                  f"{r['rate'] / base:>5.2f}x {r['usec_job']:>14.1f} {r['busiest_share']:>13.0%} "
                  f"{r['expected_share']:>8.0%} {r['busiest_cpu']:>11.0%}", flush=True)


if __name__ == "__main__":
    main()
