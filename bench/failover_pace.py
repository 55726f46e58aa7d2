"""How fast the healthy shards' queues drain while another primary fails over.

Each trial forms a loopback cluster (3 primaries with a replica each), fills 6 queues
(the busiest on the primary that will be killed; the queues on the other primaries get
enough jobs to still be draining two seconds after the promotion), starts two ``echomq
worker`` processes (concurrency 20 per queue, a 3 ms handler), SIGKILLs the busiest queue's
primary once 1,000 of its jobs ran, waits for the replica's promotion and two more seconds,
and reads the completion instants of the healthy primaries' queues from the workers' logs:
their jobs per second in the 2 s before the kill, during the failover (kill -> promotion:
its average and its slowest half second), and in the 2 s after the promotion. The drill
(``tests/e2e/test_failover_drill.py``) asserts the same figures; this prints them per trial.

``--client stock`` runs the workers on valkey-py's own asyncio cluster client (which closes
every node's connections at a node's first failure) and the cluster with
``cluster-require-full-coverage yes`` (the server's default), as before the fix;
``--client steady`` (default) as shipped; ``both`` alternates them, trial by trial.

    .venv/bin/python bench/failover_pace.py [--trials 3] [--client steady|stock|both]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

from echomq import Connector
from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.embedded.cluster import LocalCluster
from echomq.verbs import jobs

QUEUES = [f"pace{i}" for i in range(6)]
BUSIEST = QUEUES[0]
SIZES = {"busiest": 5_000, "healthy": 16_000, "same shard": 1_500}
KILL_AT = 1_000
WINDOW_S, SLICE_S = 2.0, 0.5

APP = textwrap.dedent(f"""
    import asyncio, os, time
    from echomq import App, current_job

    app = App()
    LOG = open(os.environ["PACE_LOG"] + "." + str(os.getpid()), "a", buffering=1)

    def make(queue):
        async def run(n):
            await asyncio.sleep(0.003)
            LOG.write(queue + " " + repr(time.time()) + "\\n")
        app.task(run, queue=queue, name="pace." + queue, lease_ms=3000)

    for q in {QUEUES!r}:
        make(q)
""")
# the workers on valkey-py's own client: the connector's cluster class swapped back
STOCK = ("import sys, valkey.asyncio.cluster as c, echomq.connectors.aconnector as a; "
         "a.SteadyCluster = c.ValkeyCluster; from echomq.cli import main; "
         "sys.exit(main(sys.argv[1:]))")


def finished(prefix: pathlib.Path, queues: list[str]) -> list[float]:
    out: list[float] = []
    for path in prefix.parent.glob(prefix.name + ".*"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in queues:
                out.append(float(parts[1]))
    return sorted(out)


def rate(times: list[float], start: float, end: float) -> float:
    return sum(1 for t in times if start <= t < end) / max(end - start, 1e-9)


def slowest(times: list[float], start: float, end: float) -> float:
    steps = max(1, int((end - start - SLICE_S) * 10) + 1)
    return min(rate(times, start + i / 10, start + i / 10 + SLICE_S) for i in range(steps))


def trial(stock: bool, folder: pathlib.Path) -> dict[str, float]:
    (folder / "paceapp.py").write_text(APP)
    prefix = folder / "effects"
    coverage = ["--cluster-require-full-coverage", "yes"] if stock else []
    with LocalCluster(masters=3, replicas=1, extra_args=coverage) as cl:
        victim = cl.owner(keyspace.queue_key(BUSIEST, "pending"))
        healthy = [q for q in QUEUES
                   if cl.owner(keyspace.queue_key(q, "pending")).port != victim.port]
        conn = Connector.connect(cl.url)
        for q in QUEUES:
            n = SIZES["busiest" if q == BUSIEST else "healthy" if q in healthy
                      else "same shard"]
            body = encode(f"pace.{q}", [0])
            for at in range(0, n, 2_000):
                jobs.enqueue_many(conn, q, [(ids.mint(), body) for _ in range(min(2_000, n - at))])
        conn.close()
        for node in cl.primaries():
            cl.client(node).execute_command("WAIT", 1, 5000)
        env = {**os.environ, "PACE_LOG": str(prefix), "ECHOMQ_URL": cl.url,
               "PYTHONPATH": os.pathsep.join(p for p in (str(folder),
                                                         os.environ.get("PYTHONPATH")) if p)}
        argv = ["worker", "paceapp:app", "--concurrency", "20", "--grace", "1"]
        head = [sys.executable, "-c", STOCK] if stock else [sys.executable, "-m", "echomq.cli"]
        workers = [subprocess.Popen([*head, *argv], cwd=folder, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(2)]
        try:
            while len(finished(prefix, [BUSIEST])) < KILL_AT:
                time.sleep(0.02)
            victim.kill()
            killed = time.time()
            cl.wait_ok(timeout=20)
            promoted = time.time()
            time.sleep(WINDOW_S + 0.2)
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                w.wait(15)
    times = finished(prefix, healthy)
    return {"promoted_s": promoted - killed,
            "before": rate(times, killed - WINDOW_S, killed),
            "during": rate(times, killed, promoted),
            "slowest": slowest(times, killed, promoted),
            "after": rate(times, promoted, promoted + WINDOW_S),
            "drained": float(times[-1] < promoted + WINDOW_S)}


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--client", choices=("steady", "stock", "both"), default="steady")
    args = parser.parse_args()
    kinds = ["stock", "steady"] if args.client == "both" else [args.client]
    print(f"{'client':<7} {'trial':>5} {'promoted s':>10} {'before/s':>9} {'during/s':>9} "
          f"{'slowest 0.5 s':>13} {'after/s':>8} {'slowest/before':>14}")
    for n in range(1, args.trials + 1):
        for kind in kinds:
            with tempfile.TemporaryDirectory() as tmp:
                r = trial(kind == "stock", pathlib.Path(tmp))
            note = "  (healthy queues drained early)" if r["drained"] else ""
            print(f"{kind:<7} {n:>5} {r['promoted_s']:>10.2f} {r['before']:>9.0f} "
                  f"{r['during']:>9.0f} {r['slowest']:>13.0f} {r['after']:>8.0f} "
                  f"{r['slowest'] / max(r['before'], 1):>14.2f}{note}", flush=True)


if __name__ == "__main__":
    main()
