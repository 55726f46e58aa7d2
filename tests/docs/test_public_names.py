"""The guides, README and examples teach one spelling, the public one: names come from
``echomq`` (``from echomq import flows``; ``flows.Node``), never from a layer
(``echomq.verbs.flows``, ``echomq.tasks.worker.run_worker``) or a second path to a public
module (``from echomq.flows import Node``). The internals pages and the generated module
map name the layers on purpose; the generated API page points at each name's definition."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import ROOT

LAYER_PATH = re.compile(r"echomq\.(core|verbs|runtime|tasks|connectors|embedded)\b")
SECOND_SPELLING = re.compile(r"^\s*from echomq\.(?!dashboard\b)[\w.]+ import", re.M)
# pages about the layers themselves, and the pages generated from the code: the module map
# and the API page's mkdocstrings directives; the CLI page is the parser's own help text
EXEMPT = {"docs/modules.md", "docs/reference/api.md", "docs/reference/cli.md"}


def _taught() -> list[Path]:
    pages = [p for p in (ROOT / "docs").rglob("*.md")
             if "internals" not in p.parts and str(p.relative_to(ROOT)) not in EXEMPT]
    examples = [p for p in (ROOT / "examples").rglob("*")
                if p.suffix in (".py", ".md") and "__pycache__" not in p.parts]
    return [ROOT / "README.md", *pages, *examples]


def test_the_guides_and_examples_use_public_names_only() -> None:
    found = []
    for path in _taught():
        text = path.read_text()
        for pattern in (LAYER_PATH, SECOND_SPELLING):
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0).strip()}")
    assert not found, "\n".join(found)


def test_the_check_sees_a_layer_path_and_a_second_spelling() -> None:
    assert LAYER_PATH.search("from echomq.tasks.worker import run_worker")
    assert SECOND_SPELLING.search("x = 1\nfrom echomq.flows import Node\n")
    assert not SECOND_SPELLING.search("from echomq import flows\n")
    assert not SECOND_SPELLING.search("from echomq.dashboard.asgi import dashboard_app\n")
