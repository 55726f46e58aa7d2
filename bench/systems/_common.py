"""What every system's bench driver shares: the command line, the recorder, the reply.

Stdlib only: this file is imported by drivers running in each peer's own virtualenv.

A driver is run twice per drain/release measurement: ``produce`` (load the queue, timed
or not) and ``work`` (one worker process that records the HOST wall clock, ``time.time()``,
at the start of every handler call and exits the moment it has seen ``--n`` calls). The
orchestrator (``bench/run.py``) turns those timestamps into rates and lateness.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

# the same no-op job for every system: a task name and no arguments
PAYLOAD = b'{"task":"noop","args":[]}'
TASK = "noop"
CHUNK = 1000  # jobs per bulk call, the same for every system
SCHEDULE_AHEAD_S = 60  # the "schedule at +60 s" scenarios

PRODUCE_SCENARIOS = (
    "enqueue-one",   # enqueue now, one awaited call per job
    "enqueue-bulk",  # enqueue now, CHUNK jobs per call
    "schedule-one",  # schedule at +60 s, one awaited call per job
    "schedule-bulk", # schedule at +60 s, CHUNK jobs per call
    "load-now",      # untimed setup for drain: N jobs waiting (bulk)
    "load-at",       # untimed setup for release: N jobs due at --due (bulk)
)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("produce", "work"))
    ap.add_argument("--url", required=True, help="redis://:password@host:port/0")
    ap.add_argument("--queue", default="bench")
    ap.add_argument("--scenario", choices=PRODUCE_SCENARIOS)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--due", type=float, default=0.0, help="load-at: HOST epoch seconds")
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--out", help="work: where the handler timestamps go")
    ap.add_argument("--variant", default="", help="a system-specific flavour (e.g. wire)")
    return ap.parse_args(argv)


def chunks(n: int, size: int = CHUNK) -> list[range]:
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def report(**fields: Any) -> None:
    """The driver's one line of output the orchestrator reads."""
    sys.stdout.write("RESULT " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def ready() -> None:
    """Tell the orchestrator this worker is connected and about to wait for work."""
    sys.stdout.write("READY\n")
    sys.stdout.flush()


class Recorder:
    """Counts handler calls; on the n-th, writes every start time and ends the process.

    Ending with ``os._exit`` from inside the handler is deliberate: no peer needs a
    shutdown protocol, and the last job's own completion write is the only one skipped.
    """

    def __init__(self) -> None:
        self.n = 0
        self.out = ""
        self.stamps: list[float] = []

    def arm(self, n: int, out: str) -> None:
        self.n, self.out = n, out
        self.stamps = []

    def __call__(self) -> None:
        stamps = self.stamps
        stamps.append(time.time())
        if len(stamps) >= self.n:
            self.finish()

    def finish(self) -> None:
        with open(self.out + ".tmp", "w") as fh:
            json.dump({"stamps": self.stamps}, fh)
        os.replace(self.out + ".tmp", self.out)
        sys.stdout.flush()
        os._exit(0)


RECORD = Recorder()
