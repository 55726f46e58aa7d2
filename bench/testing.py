"""The testing kit's cost: what one test with the plugin's fixtures takes, and a file of many.

    .venv/bin/python bench/testing.py                 # all rows (Celery's when installable)
    .venv/bin/python bench/testing.py --tests 300 --file 1000 --no-celery
    .venv/bin/python bench/testing.py --against /work/main --repeat 3   # side by side

Each row is a generated test file run by pytest in a subprocess, with a small timing plugin
that records every test's setup + call + teardown (pytest's own ``report.duration``):

- ``kit``: "enqueue + drain one job" with ``echomq_app`` (an App on the session's ephemeral
  server, the keyspace flushed first): median and p90 per test (target: median <= 5 ms).
- ``--against DIR``: the ``kit`` row of another checkout (its ``echomq`` first on the path,
  e.g. the main branch) run alternately with this one, ``--repeat`` times each, and the
  ratio of the medians in each pair: on a shared machine the ratio holds where the
  absolute figures swing.
- ``kit-file``: a file of ``--file`` such tests (1,000): the session's wall time, collection
  and the server's start included, and the whole process (interpreter and imports too)
  (target: <= 15 s).
- ``subprocess-worker``: what teams do without a kit: enqueue, then run ``echomq worker
  --burst`` in a subprocess and read the job's result (``--worker-tests`` tests, 5).
- ``celery-eager``: Celery's ``task_always_eager`` (``add.delay(1, 2).get()``), which skips
  the broker, the serialization and the worker; only when celery installs into
  ``bench/.venvs/celery`` (made on first use from the package index, as bench/run.py makes
  the peers'; celery is never a dependency of the project).

The benchmark never runs in CI and never in a timed unit test.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"
CELERY = ["celery", "pytest"]

TIMING = '''
import json, os, time

import pytest

DURATIONS = {}
CPU = []
T0 = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    began = time.process_time()
    yield
    CPU.append(time.process_time() - began)


def pytest_sessionstart(session):
    T0.append(time.perf_counter())


def pytest_runtest_logreport(report):
    DURATIONS[report.nodeid] = DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["BENCH_OUT"], "w") as f:
        json.dump({"durations": list(DURATIONS.values()), "cpu": CPU,
                   "session_s": time.perf_counter() - T0[0], "exit": int(exitstatus)}, f)
'''

KIT = '''
import pytest
from echomq import testing


@pytest.mark.parametrize("i", range({n}))
def test_enqueue_and_drain_one(echomq_app, i):
    @echomq_app.task(queue="bench", name="add")
    def add(a, b):
        return a + b

    job_id = add.enqueue(i, 1)
    assert testing.drain(echomq_app).results == {{job_id: i + 1}}
'''

WORKER_APP = '''
from echomq import App

app = App()


@app.task(queue="bench", name="add", keep_result=60)
def add(a, b):
    return a + b
'''

WORKER = '''
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("i", range({n}))
def test_enqueue_then_a_burst_worker(echomq_app, i, monkeypatch):
    monkeypatch.setenv("ECHOMQ_URL", echomq_app.url)
    import benchapp

    benchapp.app.url = echomq_app.url
    job_id = benchapp.add.enqueue(i, 1)
    subprocess.run([sys.executable, "-m", "echomq.cli", "worker", "benchapp:app", "--burst",
                    "--beat-ms", "20", "--log-level", "WARNING"], check=True,
                   env={{**os.environ, "ECHOMQ_URL": echomq_app.url}})
    assert benchapp.app.result(job_id, timeout=5) == i + 1
'''

EAGER = '''
import pytest
from celery import Celery

app = Celery("bench", broker="memory://", backend="cache+memory://")
app.conf.task_always_eager = True


@app.task
def add(a, b):
    return a + b


@pytest.mark.parametrize("i", range({n}))
def test_delay_eager(i):
    assert add.delay(i, 1).get() == i + 1
'''


def run_file(name: str, body: str, python: str = sys.executable, plugin: bool = True,
             extra: dict[str, str] | None = None, root: pathlib.Path | None = None
             ) -> dict[str, float | list[float] | int]:
    """Run one generated test file in a fresh pytest process; its timings. ``root``: the
    checkout whose ``echomq`` it imports (default this one, and the caller's path)."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="emq-bench-testing-"))
    (work / "conftest.py").write_text(TIMING)
    (work / f"test_{name}.py").write_text(textwrap.dedent(body))
    for file, text in (extra or {}).items():
        (work / file).write_text(text)
    out = work / "out.json"
    path = [str(work), str(ROOT), os.environ.get("PYTHONPATH")] if root is None else [
        str(work), str(root)]
    env = {**os.environ, "BENCH_OUT": str(out), "PYTHONPATH": os.pathsep.join(filter(None, path))}
    args = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if plugin:
        args += ["-p", "echomq.testing.plugin"]
    began = time.perf_counter()
    done = subprocess.run([*args, f"test_{name}.py"], cwd=work, env=env,
                          capture_output=True, text=True)
    process_s = time.perf_counter() - began
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"{name}: pytest failed\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    got = json.loads(out.read_text())
    got["process_s"] = process_s
    return dict(got)


def per_test(got: dict[str, float | list[float] | int]) -> tuple[float, float, int]:
    """(median ms, p90 ms, tests) of the per-test durations."""
    raw = got["durations"]
    assert isinstance(raw, list)
    ms = sorted(d * 1000 for d in raw)
    return statistics.median(ms), ms[int(len(ms) * 0.9)], len(ms)


def cpu_ms(got: dict[str, float | list[float] | int]) -> float:
    """The median CPU time (ms) the test process spent per test, its threads included:
    the kit's own cost, which a loaded machine does not swing as it swings wall time."""
    raw = got["cpu"]
    assert isinstance(raw, list)
    return statistics.median(raw) * 1000


def celery_python() -> str | None:
    """``bench/.venvs/celery``'s interpreter (made on first use), or None when celery cannot
    be installed here (no index reachable)."""
    where = VENVS / "celery"
    stamp = where / "bench-requirements.txt"
    want = "\n".join(CELERY) + "\n"
    python = where / "bin" / "python"
    if stamp.exists() and stamp.read_text() == want and python.exists():
        return str(python)
    print(f"# creating {where} with {' '.join(CELERY)}", flush=True)
    made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)])
    if made.returncode != 0:
        return None
    got = subprocess.run([str(python), "-m", "pip", "install", "-q", *CELERY],
                         capture_output=True, text=True)
    if got.returncode != 0:
        print(f"# celery is not installable here: {got.stderr.strip()[-300:]}")
        return None
    stamp.write_text(want)
    return str(python)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=300, help="tests in the per-test rows")
    parser.add_argument("--file", type=int, default=1000, help="tests in the file row")
    parser.add_argument("--worker-tests", type=int, default=5)
    parser.add_argument("--no-celery", action="store_true")
    parser.add_argument("--against", type=pathlib.Path, default=None,
                        help="another checkout whose kit row runs alternately with this one")
    parser.add_argument("--repeat", type=int, default=1, help="kit rows (pairs) per run")
    opts = parser.parse_args()

    rows: list[tuple[str, str]] = []
    for i in range(max(1, opts.repeat)):
        got = run_file("kit", KIT.format(n=opts.tests))
        med, p90, n = per_test(got)
        rows.append((f"kit: enqueue + drain one job, fixture included (#{i + 1})",
                     f"median {med:.2f} ms, p90 {p90:.2f} ms, cpu {cpu_ms(got):.2f} ms "
                     f"({n} tests; target <= 5 ms)"))
        if opts.against is not None:
            theirs = run_file("kit", KIT.format(n=opts.tests), root=opts.against.resolve())
            other, p90, n = per_test(theirs)
            rows.append((f"kit at {opts.against} (#{i + 1})",
                         f"median {other:.2f} ms, p90 {p90:.2f} ms, cpu "
                         f"{cpu_ms(theirs):.2f} ms ({n} tests); this checkout / that: "
                         f"median {med / other:.2f}, cpu {cpu_ms(got) / cpu_ms(theirs):.2f}"))
    whole = run_file("kit_file", KIT.format(n=opts.file))
    rows.append((f"kit-file: {opts.file} such tests in one file",
                 f"session {whole['session_s']:.2f} s, process {whole['process_s']:.2f} s "
                 f"(target <= 15 s)"))
    if opts.against is not None:
        theirs = run_file("kit_file", KIT.format(n=opts.file), root=opts.against.resolve())
        rows.append((f"kit-file at {opts.against}",
                     f"session {theirs['session_s']:.2f} s, process "
                     f"{theirs['process_s']:.2f} s"))
    med, p90, n = per_test(run_file("worker", WORKER.format(n=opts.worker_tests),
                                    extra={"benchapp.py": WORKER_APP}))
    rows.append(("subprocess-worker: enqueue, `echomq worker --burst`, read the result",
                 f"median {med:.0f} ms, p90 {p90:.0f} ms ({n} tests)"))
    python = None if opts.no_celery else celery_python()
    if python is not None:
        med, p90, n = per_test(run_file("eager", EAGER.format(n=opts.tests), python=python,
                                        plugin=False))
        rows.append(("celery-eager: `add.delay(1, 2).get()` with task_always_eager",
                     f"median {med:.2f} ms, p90 {p90:.2f} ms ({n} tests; no broker, "
                     "no serialization, no worker)"))
    else:
        rows.append(("celery-eager", "skipped (--no-celery, or celery not installable)"))
    width = max(len(r[0]) for r in rows)
    for what, value in rows:
        print(f"{what:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
