"""Small modules named for what they hold: no module of the package over 450 lines (issue
31's rule), so a module that grows past it is split before it becomes a knot."""

from __future__ import annotations

from pathlib import Path

import echomq

MAX_LINES = 450
PACKAGE = Path(echomq.__file__).parent


def too_long(root: Path) -> dict[str, int]:
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines())
             for p in root.rglob("*.py")}
    return {name: n for name, n in sizes.items() if n > MAX_LINES}


def test_no_module_is_over_450_lines() -> None:
    assert too_long(PACKAGE) == {}


def test_the_rule_sees_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert too_long(tmp_path) == {"long.py": MAX_LINES + 1}
