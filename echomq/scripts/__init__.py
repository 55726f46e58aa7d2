"""The Lua scripts, one file per transition, packaged as data.

A file is named for its verb and its key count (``schedule-2.lua``), BullMQ style, and
opens with a header naming every KEY and ARGV. Shared fragments live in ``includes/`` and
are spliced in where a script says ``--@include <name>``; an include may itself include
others, and each is spliced once per script (at its first mention), so a fragment can name
what it needs without the script knowing. ``source(name)`` returns the spliced text, which
is what the server runs and what ``sha(name)`` hashes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r"^--@include (\w+)$", re.M)


@dataclass(frozen=True, slots=True)
class Script:
    """A loaded script: its verb, the number of KEYS it declares, its text and SHA1."""

    name: str
    numkeys: int
    source: str
    sha: str


def _files() -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for entry in resources.files(__name__).iterdir():
        stem, _, ext = entry.name.rpartition(".")
        if ext != "lua":
            continue
        verb, _, keys = stem.rpartition("-")
        out[verb] = (entry.name, int(keys))
    return out


def names() -> list[str]:
    """Every script's verb name, sorted."""
    return sorted(_files())


def _read(relpath: str) -> str:
    return resources.files(__name__).joinpath(relpath).read_text(encoding="utf-8")


def _splice(text: str, seen: set[str]) -> str:
    def one(m: re.Match[str]) -> str:
        inc = m.group(1)
        if inc in seen:
            return f"-- ({inc}: spliced above)"
        seen.add(inc)
        return _splice(_read(f"includes/{inc}.lua"), seen).rstrip("\n")

    return _INCLUDE.sub(one, text)


@cache
def get(name: str) -> Script:
    """The script for verb ``name`` (``KeyError`` for an unknown name)."""
    files = _files()
    if name not in files:
        raise KeyError(f"no script named {name!r}; known: {', '.join(sorted(files))}")
    filename, numkeys = files[name]
    text = _splice(_read(filename), set())
    return Script(name, numkeys, text, hashlib.sha1(text.encode()).hexdigest())


def source(name: str) -> str:
    """The Lua text of the named script, includes spliced in."""
    return get(name).source


def sha(name: str) -> str:
    """The SHA1 the server files the script under (what EVALSHA sends)."""
    return get(name).sha


def header(name: str) -> str:
    """The comment header of the named script's file (its KEYS/ARGV/Reply contract), as one
    line of text."""
    filename, _ = _files()[name]
    lines = []
    for line in _read(filename).splitlines():
        if not line.startswith("--") or line.startswith("--@"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def _between(text: str, start: str, *ends: str) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    j = min((k for k in (text.find(e, i + len(start)) for e in ends) if k >= 0), default=len(text))
    return text[i:j].strip().rstrip(",;")


def table_markdown() -> str:
    """One row per script, drawn from the headers (docs/reference/scripts.md's table)."""
    rows = ["| script | KEYS | ARGV | reply |", "|---|---|---|---|"]
    for name in names():
        text = header(name)
        keys = _between(text, "KEYS[1]", "ARGV[")
        argv = _between(text, "ARGV[1]", "Reply")
        reply = re.split(r"(?<!\.)\.\s|\sRefusal|\sDerived", _between(text, "Reply"))[0]
        cells = (f"`{_files()[name][0]}`", keys, argv, reply)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)
