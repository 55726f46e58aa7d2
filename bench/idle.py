"""What an idle worker costs, and how soon it picks up a job (issue 34: idle is free).

    PYTHONPATH=$PWD python bench/idle.py                  # 1, 100, 1,000 (+10,000 pickup)
    PYTHONPATH=$PWD python bench/idle.py --queues 1,1000 --seconds 10 --pickups 20

Starts a fresh embedded Valkey (the EMQ module loaded when built) and, per row, ONE real
``echomq worker`` subprocess on an app with that many queues (one task each), nothing due
and nothing pending. Once the worker says it serves, it settles for ``--settle`` s, then
for ``--seconds`` s the bench reads:

- worker: the subprocess's CPU (utime + stime from /proc) as % of one core;
- server: the Valkey process's CPU the same way;
- cmds/s: the INFO commandstats calls delta (the bench's own INFO calls taken out);
- pickup p50/max: jobs enqueued one at a time on a random idle queue, each timed from the
  enqueue's return to the handler's start (the handler appends ``time.time()`` to a file;
  same host, so the same wall clock);
- start: seconds from the spawn to the worker's start line.

The last row: ``--fleet`` (20) idle workers on one queue, their CPU together. Figures
swing with the machine's load; the load average is printed with the table.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import valkey

from echomq.embedded.server import EmbeddedServer

APP = textwrap.dedent('''
    import os, time
    from echomq import App

    app = App(os.environ["IDLE_URL"])
    LOG = os.environ["IDLE_LOG"]

    def started(token):
        with open(LOG, "a") as f:
            f.write(f"{token} {time.time()}\\n")

    for i in range(int(os.environ["IDLE_QUEUES"])):
        app.task(started, name=f"t{i}", queue=f"idle{i}")
''')
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (HOST, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def calls(client: valkey.Valkey) -> int:
    return sum(int(v["calls"]) for k, v in client.info("commandstats").items())


class Spawned:
    """``n`` ``echomq worker`` subprocesses on the app module in ``work``."""

    def __init__(self, work: Path, url: str, queues: int, n: int = 1) -> None:
        env = {**os.environ, "IDLE_URL": url, "IDLE_LOG": str(work / "started.log"),
               "IDLE_QUEUES": str(queues), "PYTHONPATH": os.pathsep.join(
                   [str(work), os.environ.get("PYTHONPATH", "")])}
        self.began = time.monotonic()
        self.ready: list[float] = []
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", "echomq.cli.main", "worker", "idleapp:app",
             "--concurrency", "1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for _ in range(n)]
        self._seen = threading.Semaphore(0)
        for p in self.procs:
            threading.Thread(target=self._read, args=(p,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        told = False
        for line in proc.stderr:
            if not told and " serving " in line:
                told = True
                self.ready.append(time.monotonic() - self.began)
                self._seen.release()
            elif "Traceback" in line or "Error" in line:
                sys.stderr.write(line)

    def wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        return all(self._seen.acquire(timeout=max(0.0, end - time.monotonic()))
                   for _ in self.procs)

    def cpu(self) -> float:
        return sum(cpu_s(p.pid) for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def measure(srv: EmbeddedServer, client: valkey.Valkey, fleet: Spawned,
            seconds: float) -> tuple[float, float, float]:
    """(workers' % of a core, server's % of a core, commands/s) over ``seconds``."""
    assert srv.pid is not None
    w0, s0, c0, t0 = fleet.cpu(), cpu_s(srv.pid), calls(client), time.monotonic()
    time.sleep(seconds)
    w1, s1, c1, t1 = fleet.cpu(), cpu_s(srv.pid), calls(client), time.monotonic()
    span = t1 - t0
    return (100 * (w1 - w0) / span, 100 * (s1 - s0) / span,
            (c1 - c0 - 1) / span)  # the second INFO counts itself


def pickups(work: Path, queues: int, n: int, url: str) -> list[float]:
    """ms from each enqueue's return to its handler's start, one job at a time."""
    sys.path.insert(0, str(work))
    os.environ.update(IDLE_URL=url, IDLE_LOG=str(work / "started.log"),
                      IDLE_QUEUES=str(queues))
    import importlib

    import idleapp
    importlib.reload(idleapp)
    log = work / "started.log"
    out = []
    rnd = random.Random(34)
    for k in range(n):
        token = f"p{k}"
        task = idleapp.app.tasks[f"t{rnd.randrange(queues)}"]
        task.enqueue(token)
        sent = time.time()
        deadline = time.monotonic() + 10
        got = None
        while got is None and time.monotonic() < deadline:
            if log.exists():
                for line in log.read_text().splitlines():
                    tok, at = line.split()
                    if tok == token:
                        got = float(at)
            if got is None:
                time.sleep(0.0005)
        out.append((got - sent) * 1000 if got is not None else float("inf"))
        time.sleep(rnd.uniform(0.05, 0.15))  # idle again between jobs
    return out


def row(srv: EmbeddedServer, work: Path, queues: int, args: Any, *, n: int = 1,
        pick: bool = True) -> dict[str, Any]:
    client = valkey.Valkey.from_url(srv.url)
    client.flushall()
    (work / "started.log").unlink(missing_ok=True)
    fleet = Spawned(work, srv.url, queues, n)
    try:
        if not fleet.wait_ready(args.start_timeout):
            return {"queues": queues, "workers": n, "error": "not ready"}
        time.sleep(args.settle)
        wcpu, scpu, rate = measure(srv, client, fleet, args.seconds)
        ms = pickups(work, queues, args.pickups, srv.url) if pick else []
    finally:
        fleet.stop()
        client.close()
    return {"queues": queues, "workers": n, "worker": wcpu, "server": scpu, "cmds": rate,
            "p50": statistics.median(ms) if ms else None, "max": max(ms) if ms else None,
            "start": max(fleet.ready)}


def show(r: dict[str, Any]) -> None:
    name = f"{r['queues']:>6} queue{'s' if r['queues'] > 1 else ' '} x {r['workers']:>2}"
    if "error" in r:
        print(f"{name}  {r['error']}", flush=True)
        return
    pick = (f"{r['p50']:>8.1f} {r['max']:>8.1f}" if r["p50"] is not None
            else f"{'-':>8} {'-':>8}")
    print(f"{name} {r['worker']:>8.1f}% {r['server']:>8.1f}% {r['cmds']:>9.0f} {pick} "
          f"{r['start']:>7.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queues", default="1,100,1000,10000",
                    help="queue counts, one worker each (10,000: pickup only, long start)")
    ap.add_argument("--fleet", type=int, default=20, help="idle workers on one queue (0: none)")
    ap.add_argument("--seconds", type=float, default=10.0, help="the measured span")
    ap.add_argument("--settle", type=float, default=3.0, help="s after the start line")
    ap.add_argument("--pickups", type=int, default=20, help="jobs timed per row")
    ap.add_argument("--start-timeout", type=float, default=180.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedServer(ephemeral=True) as srv:
        work = Path(tmp)
        (work / "idleapp.py").write_text(APP)
        print(f"load average {os.getloadavg()[0]:.2f}; one idle `echomq worker` per row, "
              f"{args.seconds:.0f} s measured after {args.settle:.0f} s settled")
        print(f"{'':>20} {'worker':>9} {'server':>9} {'cmds/s':>9} {'p50 ms':>8} "
              f"{'max ms':>8} {'start s':>7}")
        for q in (int(x) for x in args.queues.split(",")):
            show(row(srv, work, q, args))
        if args.fleet:
            show(row(srv, work, 1, args, n=args.fleet, pick=False))
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
