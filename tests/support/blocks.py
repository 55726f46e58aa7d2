"""The Python code blocks of the Markdown pages (README.md and docs/), as the docs tests run
them: each block is a script of its own, saved as ``block.py`` and run by this interpreter
in a fresh directory with ``ECHOMQ_URL`` naming a real server.

A block that cannot run where the tests run says so on the line before its fence, with a
reason: ``<!-- no-run: needs a long-running worker -->``. A block that needs a Valkey
Cluster says ``<!-- needs: cluster -->`` and runs against the tests' cluster.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

from tests.support.paths import ROOT

FENCE = re.compile(r"^(\s*)```python\s*$")
MARKER = re.compile(r"^<!--\s*(no-run|needs):\s*(.*?)\s*-->\s*$")
NEEDS = ("cluster",)


@dataclass(frozen=True)
class Block:
    path: str          # the page, relative to the repository's root
    line: int          # the fence's line, 1-based
    code: str
    skip: str | None   # the no-run reason
    needs: str | None  # "cluster", or None for the single server

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def blocks_of(text: str, path: str = "<text>") -> list[Block]:
    """Every ```python block of ``text``, with the marker on the line before its fence.
    A marker without a reason, or a ``needs`` this collector does not know, is an error."""
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: a ```python block is never closed")
        i += 1
        skip = needs = None
        before = lines[start - 1].strip() if start else ""
        marker = MARKER.match(before)
        if marker:
            kind, what = marker.groups()
            if not what:
                raise ValueError(f"{path}:{start}: `<!-- {kind}: -->` needs a reason")
            if kind == "no-run":
                skip = what
            elif what not in NEEDS:
                raise ValueError(f"{path}:{start}: unknown need {what!r} (known: {NEEDS})")
            else:
                needs = what
        found.append(Block(path, start + 1, "\n".join(body) + "\n", skip, needs))
    return found


def pages() -> list[pathlib.Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def collect() -> list[Block]:
    out: list[Block] = []
    for page in pages():
        out += blocks_of(page.read_text(), str(page.relative_to(ROOT)))
    return out


def run(block: Block, url: str, workdir: pathlib.Path, timeout: float = 90
        ) -> subprocess.CompletedProcess[str]:
    """Run ``block`` as ``python block.py`` in ``workdir`` against the server at ``url``
    (a data dir of its own too, so nothing can reach the user's embedded server)."""
    script = workdir / "block.py"
    script.write_text(block.code)
    env = {**os.environ, "ECHOMQ_URL": url, "ECHOMQ_DATA": str(workdir / "data"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(workdir),
                                                       os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(script)], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)
