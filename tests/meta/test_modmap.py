"""docs/modules.md is the module map the code gives (dev/modmap.py): a module added, moved
or re-described without regenerating it fails here."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


def test_the_module_map_is_current() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "dev" / "modmap.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = (ROOT / "docs" / "modules.md").read_text()
    for module in ("echomq.core.steps", "echomq.verbs.jobs", "echomq.runtime.consumer",
                   "echomq.tasks.app", "echomq.cli.main"):
        assert f"| `{module.removeprefix('echomq.')}` |" in text
