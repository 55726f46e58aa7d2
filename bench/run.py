"""Run the whole bench: every system, every scenario, one fresh Valkey each; print the table.

    .venv/bin/python bench/run.py            # N = 20,000, the full run (~10-15 min, 2 cores)
    .venv/bin/python bench/run.py --quick    # N = 2,000, a smoke run (~2 min)
    .venv/bin/python bench/run.py --systems echomq-4,raw --scenarios drain,release

Peers run from their own virtualenvs under ``bench/.venvs/`` (made on first use from PyPI
with the pins in ``PEERS``); EchoMQ and the raw baseline run from this interpreter. Each
measurement gets its own ephemeral embedded Valkey (``EmbeddedServer``), so no system sees
another's keys, scripts or memory. Timings are HOST wall-clock and noisy: the server, the
producer or worker and this orchestrator share the machine's cores.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import pathlib
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import valkey

from echomq import native
from echomq.embedded.server import EmbeddedServer

HERE = pathlib.Path(__file__).resolve().parent
DRIVERS = HERE / "systems"
VENVS = HERE / ".venvs"
RESULTS = HERE / "results"

# peer -> pip requirements for its own virtualenv (the pins are why they cannot share one)
PEERS: dict[str, list[str]] = {
    "bullmq": ["bullmq", "redis<8", "hiredis"],  # redis-py 8's socket timeout stalls delayed jobs
    "rq": ["rq", "hiredis"],
    "arq": ["arq", "redis<6"],  # arq pulls redis[hiredis]
    "saq": ["saq[redis,hiredis]", "typing_extensions"],  # saq 0.26 imports it undeclared
}


@dataclass
class System:
    name: str
    driver: str
    variant: str = ""
    venv: str | None = None  # None: this interpreter
    native: bool = False
    echomq: bool = False
    scenarios: tuple[str, ...] | None = None  # None: all

    def python(self) -> str:
        if self.venv is None:
            return sys.executable
        return str(VENVS / self.venv / "bin" / "python")


def all_systems() -> list[System]:
    systems = [System("echomq-4", "echomq_sys.py", "4", echomq=True)]
    systems.append(System("echomq-4-sync", "echomq_sys.py", "sync", echomq=True,
                          scenarios=("enqueue-one", "schedule-one")))
    systems.append(System("echomq-4-pipelined", "echomq_sys.py", "pipelined", echomq=True,
                          scenarios=("drain", "release", "release-light")))
    if native.available():
        systems.append(System("echomq-6", "echomq_sys.py", "6", native=True, echomq=True))
    systems.append(System("echomq-consumer", "echomq_sys.py", "consumer", echomq=True,
                          scenarios=("drain", "release", "release-light")))
    if native.available():
        systems.append(System("echomq-consumer-6", "echomq_sys.py", "consumer-6",
                              native=True, echomq=True,
                              scenarios=("drain", "release", "release-light")))
    systems.append(System("echomq-app", "echomq_sys.py", "app", echomq=True,
                          scenarios=("drain", "release", "release-light")))
    if native.available():
        systems.append(System("echomq-app-6", "echomq_sys.py", "app-6", native=True,
                              echomq=True, scenarios=("drain", "release", "release-light")))
    systems += [System(p, f"{p}_sys.py", venv=p) for p in PEERS]
    systems.append(System("raw", "raw_sys.py"))
    return systems


SCENARIOS = ("enqueue-one", "enqueue-bulk", "schedule-one", "schedule-bulk",
             "drain", "release", "release-light")


# -- virtualenvs ---------------------------------------------------------------------------

def ensure_venv(peer: str) -> None:
    """Create ``bench/.venvs/<peer>`` with its pins unless it already holds exactly them."""
    where = VENVS / peer
    stamp = where / "bench-requirements.txt"
    want = "\n".join(PEERS[peer]) + "\n"
    if stamp.exists() and stamp.read_text() == want and (where / "bin" / "python").exists():
        return
    print(f"# creating {where} with {' '.join(PEERS[peer])}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)], check=True)
    subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q",
                    *PEERS[peer]], check=True)
    stamp.write_text(want)


def versions(system: System) -> str:
    if system.venv is None:
        return ""
    out = subprocess.run([system.python(), "-m", "pip", "list", "--format=json"],
                         capture_output=True, text=True, check=False).stdout
    wanted = {system.venv, "redis", "hiredis"}
    try:
        pkgs = {p["name"].lower(): p["version"] for p in json.loads(out)}
    except ValueError:
        return "?"
    return " ".join(f"{k} {pkgs[k]}" for k in sorted(wanted) if k in pkgs)


# -- one server per measurement ------------------------------------------------------------

@contextlib.contextmanager
def fresh_server(system: System) -> Iterator[tuple[str, valkey.Valkey]]:
    srv = EmbeddedServer(ephemeral=True, native=system.native)
    srv.start()
    try:
        url = f"redis://:{quote(srv.password, safe='')}@{srv.host}:{srv.port}/0"
        admin = valkey.Valkey.from_url(url)
        try:
            yield url, admin
        finally:
            admin.close()
    finally:
        srv.stop()


def commandstats(admin: valkey.Valkey) -> dict[str, dict[str, float]]:
    stats = admin.info("commandstats")
    return {k.removeprefix("cmdstat_"): {"calls": v["calls"], "usec": v["usec"]}
            for k, v in stats.items()}


def used_memory(admin: valkey.Valkey) -> int:
    return int(admin.info("memory")["used_memory"])


# -- running a driver ----------------------------------------------------------------------

class RunFailed(Exception):
    pass


def _argv(system: System, role: str, url: str, n: int, **extra: Any) -> list[str]:
    argv = [system.python(), str(DRIVERS / system.driver), role, "--url", url, "--n", str(n)]
    if system.variant:
        argv += ["--variant", system.variant]
    for k, v in extra.items():
        argv += [f"--{k}", str(v)]
    return argv


def produce(system: System, url: str, scenario: str, n: int, timeout: float,
            **extra: Any) -> dict[str, Any]:
    proc = subprocess.run(_argv(system, "produce", url, n, scenario=scenario, **extra),
                          capture_output=True, text=True, timeout=timeout, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RunFailed(f"{system.name} {scenario}: exit {proc.returncode}\n{proc.stderr[-2000:]}")


class Worker:
    """One worker process in its own session (RQ forks a scheduler child we must end too)."""

    def __init__(self, system: System, url: str, n: int, concurrency: int) -> None:
        stem = os.path.join(tempfile.gettempdir(), f"emqbench-{os.getpid()}-{time.time_ns()}")
        self.out, self.log = stem + ".json", stem + ".log"
        self.started = time.time()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                _argv(system, "work", url, n, out=self.out, concurrency=concurrency),
                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            self.stop()
            raise RunFailed(f"{system.name} worker did not start: {line!r}\n{self.stderr()}")
        self.ready_at = time.time()

    def wait(self, timeout: float) -> list[float]:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RunFailed(f"worker timed out after {timeout:.0f}s\n{self.stderr()}") from None
        self.stop()
        if not os.path.exists(self.out):
            raise RunFailed(f"worker exited {self.proc.returncode} without results\n"
                            f"{self.stderr()}")
        with open(self.out) as fh:
            stamps = list(json.load(fh)["stamps"])
        os.unlink(self.out)
        with contextlib.suppress(OSError):
            os.unlink(self.log)
        return stamps

    def stderr(self) -> str:
        with contextlib.suppress(OSError):
            return pathlib.Path(self.log).read_text(errors="replace")[-2000:]
        return ""

    def stop(self) -> None:
        # the worker's own session: its pid is the group id, and only our children are in it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def pct(sorted_vals: list[float], p: float) -> float:
    if not sorted_vals:
        return math.nan
    i = min(len(sorted_vals) - 1, max(0, math.ceil(p / 100 * len(sorted_vals)) - 1))
    return sorted_vals[i]


# -- scenarios -----------------------------------------------------------------------------

@dataclass
class Ctx:
    n: int
    light: int
    concurrency: int
    bulk_rate: dict[str, float] = field(default_factory=dict)  # system -> schedule-bulk jobs/s


def run_produce(system: System, scenario: str, ctx: Ctx) -> dict[str, Any]:
    with fresh_server(system) as (url, admin):
        mem0 = used_memory(admin)
        admin.config_resetstat()
        res = produce(system, url, scenario, ctx.n, timeout=60 + ctx.n / 20)
        out = {"seconds": res["seconds"], "rate": ctx.n / res["seconds"],
               "cmds": commandstats(admin)}
        if scenario == "schedule-bulk":
            out["mem_per_job"] = (used_memory(admin) - mem0) / ctx.n
            ctx.bulk_rate[system.name] = out["rate"]
        return out


def run_drain(system: System, ctx: Ctx) -> dict[str, Any]:
    with fresh_server(system) as (url, admin):
        produce(system, url, "load-now", ctx.n, timeout=60 + ctx.n / 20)
        admin.config_resetstat()
        w = Worker(system, url, ctx.n, ctx.concurrency)
        stamps = w.wait(timeout=30 + ctx.n / 100)
        first, last = min(stamps), max(stamps)
        return {"rate": (len(stamps) - 1) / max(last - first, 1e-9),
                "first_after_ready_ms": (first - w.ready_at) * 1000,
                "seconds": last - first, "cmds": commandstats(admin)}


def run_release(system: System, ctx: Ctx, n: int) -> dict[str, Any]:
    with fresh_server(system) as (url, admin):
        w = Worker(system, url, n, ctx.concurrency)
        # time for the untimed load: measured schedule-bulk rate with a wide margin
        rate = ctx.bulk_rate.get(system.name) or (
            ctx.bulk_rate.get("echomq-4", 2000.0) if system.echomq else 2000.0)
        lead = 1.5 + 2.0 * n / rate
        due = float(math.ceil(time.time() + lead))  # a whole second: saq keeps seconds
        produce(system, url, "load-at", n, timeout=60 + n / 20, due=due)
        loaded = time.time()
        admin.config_resetstat()
        if loaded > due - 0.2:
            w.stop()
            raise RunFailed(f"{system.name}: loading ended {loaded - due:+.2f}s from T")
        stamps = w.wait(timeout=due - time.time() + 30 + n / 100)
        late = sorted((s - due) * 1000 for s in stamps)
        return {"min": late[0], "p50": pct(late, 50), "p99": pct(late, 99), "max": late[-1],
                "t_to_last_ms": late[-1], "cmds": commandstats(admin)}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each numeric field's median over repeated runs (the last run's other fields)."""
    out = dict(runs[-1])
    for key, value in runs[-1].items():
        if isinstance(value, (int, float)):
            vals = sorted(float(r[key]) for r in runs)
            mid = len(vals) // 2
            out[key] = vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
    out["runs"] = len(runs)
    return out


def run_one(system: System, scenario: str, ctx: Ctx) -> dict[str, Any]:
    if scenario == "drain":
        return run_drain(system, ctx)
    if scenario == "release":
        return run_release(system, ctx, ctx.n)
    if scenario == "release-light":
        return run_release(system, ctx, ctx.light)
    return run_produce(system, scenario, ctx)


# -- the table -----------------------------------------------------------------------------

# (row label, scenario, result key, higher is better, format)
ROWS = [
    ("enqueue now, per-job call (jobs/s)", "enqueue-one", "rate", True, "{:,.0f}"),
    ("enqueue now, bulk 1,000 (jobs/s)", "enqueue-bulk", "rate", True, "{:,.0f}"),
    ("schedule +60 s, per-job call (jobs/s)", "schedule-one", "rate", True, "{:,.0f}"),
    ("schedule +60 s, bulk 1,000 (jobs/s)", "schedule-bulk", "rate", True, "{:,.0f}"),
    ("memory per scheduled job (bytes)", "schedule-bulk", "mem_per_job", False, "{:,.0f}"),
    ("drain, one worker (jobs/s)", "drain", "rate", True, "{:,.0f}"),
    ("release N due at T: T -> last (ms)", "release", "t_to_last_ms", False, "{:,.0f}"),
    ("release N: lateness min (ms)", "release", "min", False, "{:,.1f}"),
    ("release N: lateness p50 (ms)", "release", "p50", False, "{:,.1f}"),
    ("release N: lateness p99 (ms)", "release", "p99", False, "{:,.1f}"),
    ("release N: lateness max (ms)", "release", "max", False, "{:,.1f}"),
    ("release light: lateness min (ms)", "release-light", "min", False, "{:,.1f}"),
    ("release light: lateness p99 (ms)", "release-light", "p99", False, "{:,.1f}"),
    ("release light: lateness max (ms)", "release-light", "max", False, "{:,.1f}"),
]


def _value(results: dict[str, Any], system: str, scenario: str, key: str) -> float | None:
    r = results.get(system, {}).get(scenario)
    if not isinstance(r, dict) or key not in r:
        return None
    return float(r[key])


def table(results: dict[str, Any], systems: list[System], n: int, light: int) -> str:
    names = [s.name for s in systems]
    head = [f"scenario (N={n:,}, light={light})", *names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, scenario, key, up, fmt in ROWS:
        cells = [label + (" ↑" if up else " ↓")]
        for name in names:
            v = _value(results, name, scenario, key)
            err = results.get(name, {}).get(scenario)
            cells.append(fmt.format(v) if v is not None else
                         ("failed" if isinstance(err, str) else "-"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_table(results: dict[str, Any], systems: list[System]) -> str:
    """Each EchoMQ flavour's value divided by the best peer's, and by raw's."""
    peers = [s.name for s in systems if not s.echomq and s.name != "raw"]
    mine = [s.name for s in systems if s.echomq]
    head = ["scenario", *[f"{m}: / best peer, / raw" for m in mine]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, scenario, key, up, _fmt in ROWS:
        peer_vals = [(v, p) for p in peers if (v := _value(results, p, scenario, key)) is not None]
        best = (max(peer_vals) if up else min(peer_vals)) if peer_vals else None
        raw = _value(results, "raw", scenario, key)
        cells = [label + (" ↑" if up else " ↓")]
        for m in mine:
            v = _value(results, m, scenario, key)
            if v is None:
                cells.append("-")
                continue
            vs_peer = f"{v / best[0]:.2f}x ({best[1]})" if best and best[0] > 0 else "-"
            vs_raw = f"{v / raw:.2f}x" if raw else "-"
            cells.append(f"{vs_peer}, {vs_raw}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# (target, scenario, key, reference: "peer" | "raw" | "abs" | "bullmq", bound, at least?)
TARGETS = [
    ("enqueue, per-job call >= 4x best peer", "enqueue-one", "rate", "peer", 4.0, True),
    ("schedule, per-job call >= 4x best peer", "schedule-one", "rate", "peer", 4.0, True),
    ("enqueue, bulk >= 50% of raw", "enqueue-bulk", "rate", "raw", 0.5, True),
    ("schedule, bulk >= 50% of raw", "schedule-bulk", "rate", "raw", 0.5, True),
    ("drain >= 10x best peer", "drain", "rate", "peer", 10.0, True),
    ("drain >= 50% of raw", "drain", "rate", "raw", 0.5, True),
    ("release N due at once, T -> last <= 2x raw", "release", "t_to_last_ms", "raw", 2.0, False),
    ("release lateness min <= 10 ms", "release", "min", "abs", 10.0, False),
    ("release light p99 <= 20 ms", "release-light", "p99", "abs", 20.0, False),
    ("memory per scheduled job <= 180 B", "schedule-bulk", "mem_per_job", "abs", 180.0, False),
    ("memory per scheduled job <= 0.7x BullMQ", "schedule-bulk", "mem_per_job", "bullmq", 0.7,
     False),
]


def target_table(results: dict[str, Any], systems: list[System]) -> str:
    """Each issue-6 target, for every EchoMQ flavour that ran its scenario."""
    peers = [s.name for s in systems if not s.echomq and s.name != "raw"]
    mine = [s.name for s in systems if s.echomq]
    lines = ["| target | flavour | measured | met |", "|---|---|---|---|"]
    for label, scenario, key, ref, bound, at_least in TARGETS:
        for m in mine:
            v = _value(results, m, scenario, key)
            if v is None:
                continue
            if ref == "abs":
                measured, unit = v, (" ms" if key != "mem_per_job" else " B")
            else:
                if ref == "peer":
                    vals = [x for p in peers if (x := _value(results, p, scenario, key))]
                    r = (max(vals) if at_least or key == "rate" else min(vals)) if vals else None
                else:
                    r = _value(results, ref, scenario, key)
                if not r:
                    continue
                measured, unit = v / r, "x"
            ok = measured >= bound if at_least else measured <= bound
            shown = f"{measured:,.2f}{unit}" if unit == "x" else f"{measured:,.1f}{unit}"
            lines.append(f"| {label} | {m} | {shown} | {'met' if ok else 'MISSED'} |")
    return "\n".join(lines)


def cost_table(results: dict[str, Any], systems: list[System], n: int, light: int) -> str:
    """Server commands and server CPU per job (INFO commandstats over the timed phase)."""
    head = ["scenario", *[s.name for s in systems]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for scenario in SCENARIOS:
        per = light if scenario == "release-light" else n
        cells = [scenario]
        for s in systems:
            r = results.get(s.name, {}).get(scenario)
            if not isinstance(r, dict) or "cmds" not in r:
                cells.append("-")
                continue
            cmds = {k: v for k, v in r["cmds"].items() if k not in ("config|resetstat", "info")}
            calls = sum(v["calls"] for v in cmds.values()) / per
            usec = sum(v["usec"] for v in cmds.values()) / per
            cells.append(f"{calls:.2f} cmd, {usec:.1f} µs")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# the App's worker beside the runtime's Consumer at the same wire (issue 34's targets)
APP_PAIRS = (("echomq-app", "echomq-consumer"), ("echomq-app-6", "echomq-consumer-6"))


def app_table(runs: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """Per run, the App's worker over the Consumer (drain jobs/s, >= 0.9x) and over raw
    (release T -> last, <= 1.5x): repeats interleave, so run i of each ran side by side."""
    lines = ["| App's worker | drain / Consumer, per run | release T -> last / raw, per run |",
             "|---|---|---|"]

    def per_run(a: str, b: str, scenario: str, key: str) -> str:
        xs, ys = runs.get((a, scenario), []), runs.get((b, scenario), [])
        got = [x[key] / y[key] for x, y in zip(xs, ys, strict=False) if y.get(key)]
        return ", ".join(f"{r:.2f}x" for r in got) or "-"

    for app, consumer in APP_PAIRS:
        if (app, "drain") in runs or (app, "release") in runs:
            lines.append(f"| {app} | {per_run(app, consumer, 'drain', 'rate')} | "
                         f"{per_run(app, 'raw', 'release', 't_to_last_ms')} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    srv = EmbeddedServer(ephemeral=True, native=False)
    ver = "?"
    with contextlib.suppress(Exception):
        ver = subprocess.run([srv.argv()[0], "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    return (f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, {ver}")


def native_vs_script() -> str | None:
    script = HERE / "native_vs_script.py"
    if not script.exists() or not native.available():
        return None
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, check=False)
    return proc.stdout.strip() or f"(exit {proc.returncode})\n{proc.stderr[-1500:]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000, help="jobs per scenario (20,000)")
    ap.add_argument("--light", type=int, default=100, help="jobs in release-light (100)")
    ap.add_argument("--quick", action="store_true", help="N = 2,000: a smoke run")
    ap.add_argument("--concurrency", type=int, default=50,
                    help="handler concurrency of every async worker (RQ's SimpleWorker is 1)")
    ap.add_argument("--systems", help="comma-separated subset of " +
                    ",".join(s.name for s in all_systems()))
    ap.add_argument("--scenarios", help="comma-separated subset of " + ",".join(SCENARIOS))
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each measurement R times (interleaved) and report medians")
    ap.add_argument("--no-native-vs-script", action="store_true")
    args = ap.parse_args(argv)
    n = 2000 if args.quick and args.n == 20_000 else args.n
    systems = all_systems()
    if args.systems:
        wanted = args.systems.split(",")
        unknown = set(wanted) - {s.name for s in systems}
        if unknown:
            ap.error(f"unknown or unavailable systems: {sorted(unknown)}")
        systems = [s for s in systems if s.name in wanted]
    scenarios = list(SCENARIOS)
    if args.scenarios:
        scenarios = [s for s in SCENARIOS if s in args.scenarios.split(",")]
    for s in systems:
        if s.venv:
            ensure_venv(s.venv)
    ctx = Ctx(n=n, light=args.light, concurrency=args.concurrency)
    results: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    began = time.time()
    print(f"# machine: {machine()}", flush=True)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for scenario in scenarios:
        for rep in range(args.repeat):  # repeats interleave the systems: drift hits all
            for s in systems:
                if s.scenarios is not None and scenario not in s.scenarios:
                    continue
                t0 = time.time()
                try:
                    res = run_one(s, scenario, ctx)
                except (RunFailed, subprocess.TimeoutExpired) as exc:
                    results[s.name].setdefault(scenario, f"failed: {exc}")
                    print(f"{scenario:14} {s.name:16} FAILED {str(exc)[:400]}", flush=True)
                    continue
                runs.setdefault((s.name, scenario), []).append(res)
                results[s.name][scenario] = median_of(runs[(s.name, scenario)])
                brief = {k: round(v, 1) for k, v in res.items() if isinstance(v, float)}
                tag = f" #{rep + 1}" if args.repeat > 1 else ""
                print(f"{scenario:14} {s.name:16} {time.time() - t0:6.1f}s{tag} {brief}",
                      flush=True)
    elapsed = time.time() - began
    print()
    print(table(results, systems, n, args.light))
    print()
    print("Ratios (value / reference; ↑ higher is better, ↓ lower is better):")
    print()
    print(ratio_table(results, systems))
    print()
    print("Targets (ratios to the best peer and to raw):")
    print()
    print(target_table(results, systems))
    print()
    apps = app_table(runs)
    if apps:
        print("The App's worker (run_worker) beside the Consumer and raw:")
        print()
        print(apps)
        print()
    print("Server work per job (INFO commandstats, timed phase): commands, server CPU µs")
    print()
    print(cost_table(results, systems, n, args.light))
    extra = None if args.no_native_vs_script else native_vs_script()
    if extra:
        print("\nnative vs script (bench/native_vs_script.py):\n")
        print(extra)
    print(f"\n# {elapsed / 60:.1f} min; machine: {machine()}")
    print("# peers: " + "; ".join(f"{s.name}: {versions(s)}" for s in systems if s.venv))
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    dump = {"n": n, "light": args.light, "concurrency": args.concurrency,
            "repeat": args.repeat, "runs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()},
            "results": results,
            "machine": machine(), "minutes": elapsed / 60, "native_vs_script": extra}
    (RESULTS / f"run-{stamp}.json").write_text(json.dumps(dump, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
