"""The folders are the layers: the import-linter contract in pyproject.toml holds on the
package, and it fails when a module imports a layer above its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(LINT), "--no-cache", "--config", str(cwd / "pyproject.toml")],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_package_keeps_its_layers() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_an_upward_import_inside_tasks_breaks_the_inner_contract(tmp_path: Path) -> None:
    """The second contract orders the modules of tasks/: a value (admission) importing the
    task built on it is a circle, refused."""
    shutil.copytree(ROOT / "echomq", tmp_path / "echomq",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    admission = tmp_path / "echomq" / "tasks" / "admission.py"
    admission.write_text(admission.read_text() + "\n\ndef _up():\n"
                         "    from echomq.tasks import task\n    return task\n")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "echomq.tasks.admission is not allowed to import echomq.tasks.task" in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "echomq", tmp_path / "echomq",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    ids = tmp_path / "echomq" / "core" / "ids.py"
    # inside a function, as a lazy import would be: the contract counts those too
    ids.write_text(ids.read_text() + "\n\ndef _up():\n    from echomq.tasks import app\n"
                   "    return app\n")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "echomq.core is not allowed to import echomq.tasks" in done.stdout
    assert "echomq.core.ids -> echomq.tasks.app" in done.stdout
