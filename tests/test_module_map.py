"""The README's module map names every module of the package, so a module added or renamed
without its line in the map fails here rather than leaving the map stale."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent
PACKAGE = ROOT / "echomq"


def module_map() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("### Module map")
    end = text.index("\n## ", start)
    return text[start:end]


def names_in_package() -> set[str]:
    """Each module's and subpackage's own name (``claimloop``, ``jobs/``, ``admission``),
    leaving out dunder files and the dashboard's/commands' insides, which the map names by
    their package."""
    names: set[str] = set()
    for path in PACKAGE.iterdir():
        if path.suffix == ".py" and not path.name.startswith("__"):
            names.add(path.stem)
        elif path.is_dir() and (path / "__init__.py").exists():
            names.add(path.name + "/")
            if path.name in {"jobs", "repeat"}:  # the map names these packages' modules
                names |= {p.stem for p in path.glob("*.py") if not p.name.startswith("__")}
    return names


def test_the_module_map_names_every_module():
    mapped = set(re.findall(r"`([a-z_]+/?)`", module_map()))
    missing = sorted(n for n in names_in_package()
                     if n not in mapped and n.rstrip("/") not in mapped)
    assert not missing, f"README module map lacks: {missing}"
