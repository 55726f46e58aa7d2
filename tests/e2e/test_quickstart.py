"""The README's Quickstart, followed as a new user would: its ``tasks.py`` and its shell
lines, run as processes against a real Valkey (``echomq worker --burst`` in place of the
long-running worker; the queue names made unique so the shared test server stays clean)."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from tests.support.cli import echomq
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

README = ROOT / "README.md"


def quickstart() -> tuple[str, list[list[str]]]:
    text = README.read_text()
    lines = text.splitlines()
    start = lines.index("## Quickstart")
    assert start < 60 - 20, "the Quickstart opens within the README's first lines"
    section = "\n".join(lines[start:]).split("\n## ", 1)[0]
    assert len("\n".join(lines[:start]).splitlines()) + len(section.splitlines()) <= 60
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    shell = re.findall(r"```sh\n(.*?)```", section, re.S)[-1]
    commands = [shlex.split(line, comments=True) for line in shell.splitlines()]
    return code, [c for c in commands if c]


def run(argv: list[str], url: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """A Quickstart line as the user's shell runs it (``python`` is this interpreter)."""
    if argv[0] == "python":
        env = {**os.environ, "ECHOMQ_URL": url}
        return subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=60)
    assert argv[0] == "echomq", argv
    return echomq(*argv[1:], url=url, cwd=cwd)


def test_the_quickstart_runs_as_written(tmp_path, url, queue):
    code, commands = quickstart()
    for name in ("mail", "reports"):
        assert f'queue="{name}"' in code
        code = code.replace(f'queue="{name}"', f'queue="{queue}-{name}"')
    (tmp_path / "tasks.py").write_text(code)
    outputs = {}
    for argv in commands:
        if argv[1] in ("worker", "dashboard", "server") or "JOB01..." in argv:
            continue  # long-running (run below, in burst mode), or a placeholder id
        done = run(argv, url, tmp_path)
        assert done.returncode == 0, (argv, done.stderr)
        outputs[argv[1]] = done.stdout
    scheduled_id = outputs["schedule"].split()[0]

    worker = echomq("worker", "tasks:app", "--burst", url=url, cwd=tmp_path, timeout=60)
    assert worker.returncode == 0, worker.stderr
    assert "welcome, ada@example.com" in worker.stdout
    assert "welcome, bob@example.com" in worker.stdout
    assert worker.stderr.count(": completed (") == 2

    job = echomq("job", scheduled_id, url=url, cwd=tmp_path)
    assert job.returncode == 0 and "state     scheduled" in job.stdout
    assert f"queue     {queue}-reports" in job.stdout
