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
    done = _with_import(tmp_path, "tasks/admission.py", "echomq.tasks", "task")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "echomq.tasks.admission is not allowed to import echomq.tasks.task" in done.stdout


def _with_import(tmp_path: Path, module: str, imported: str, name: str
                 ) -> subprocess.CompletedProcess[str]:
    """The contracts, linted on a copy of the package whose ``module`` (a path under
    echomq/) imports ``name`` from ``imported`` inside a function, as a lazy import would
    (the contracts count those too)."""
    shutil.copytree(ROOT / "echomq", tmp_path / "echomq",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "echomq" / module
    path.write_text(path.read_text() + f"\n\ndef _up():\n    from {imported} import {name}\n"
                    f"    return {name}\n")
    return _lint(tmp_path)


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    done = _with_import(tmp_path, "core/ids.py", "echomq.tasks", "app")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "echomq.core is not allowed to import echomq.tasks" in done.stdout
    assert "echomq.core.ids -> echomq.tasks.app" in done.stdout
