"""The reference pages are what the code says: the CLI page has every command of the parser,
the API page every name of ``echomq.__all__`` (each with a docstring, as are the public
functions and classes of the verb modules it exports), and every generated page is current
(``dev/refdocs.py --check``)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import types

import echomq
from echomq.cli.main import build_parser
from tests.support.paths import ROOT

REFERENCE = ROOT / "docs" / "reference"
sys.path.insert(0, str(ROOT / "dev"))
import refdocs  # noqa: E402


def test_generated_pages_are_current() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "dev" / "refdocs.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_cli_page_has_every_command_and_option() -> None:
    page = (REFERENCE / "cli.md").read_text()
    found = list(refdocs.commands(build_parser()))
    assert len(found) > 20  # the walk reached the sub-commands
    for path, parser, _ in found:
        section = page.split(f"\n## {' '.join(path)}\n", 1)
        assert len(section) == 2, f"no section for {' '.join(path)}"
        body = section[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--log-") or flag in ("-v", "--verbose"):
                    continue  # said once, at the top
                assert flag in body, f"{' '.join(path)}: {flag} missing"


def test_api_page_has_every_public_name() -> None:
    page = (REFERENCE / "api.md").read_text()
    for name, path in refdocs.public_names():
        assert f"### `{name}`\n\n::: {path}\n" in page, name
        module, _, attr = path.rpartition(".")
        target = (importlib.import_module(path) if path in sys.modules
                  else getattr(importlib.import_module(module), attr))
        assert target is getattr(echomq, name), name


def _public_members(obj: object) -> list[tuple[str, object]]:
    if isinstance(obj, types.ModuleType):
        names = getattr(obj, "__all__", None) or [n for n in vars(obj) if not n.startswith("_")]
        out = []
        for n in names:
            v = getattr(obj, n)
            if (inspect.isfunction(v) or inspect.isclass(v)) and \
                    getattr(v, "__module__", "").startswith("echomq"):
                out.append((n, v))
        return out
    if inspect.isclass(obj):
        out = []
        for n, v in vars(obj).items():
            f = v.fget if isinstance(v, property) else v
            if not n.startswith("_") and inspect.isfunction(f):
                out.append((n, f))
        return out
    return []


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for name in echomq.__all__:
        obj = getattr(echomq, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        for member, value in _public_members(obj):
            doc = (value.__doc__ or "").strip()
            generated = inspect.isclass(value) and doc.startswith(f"{value.__name__}(")
            if not doc or generated:  # a dataclass's generated signature is no docstring
                missing.append(f"{name}.{member}")
    assert not missing, f"no docstring: {missing}"


def test_api_page_opens_with_the_user_api() -> None:
    """The user API (issue 32) precedes the low-level verbs: App with its decorators and
    inherited members, the task object, JobInfo, current_job, the canvas, testing."""
    page = (REFERENCE / "api.md").read_text()
    low = page.index("## Low-level API")
    for path in ("echomq.tasks.app.App", "echomq.tasks.task.Task", "echomq.verbs.status.JobInfo",
                 "echomq.runtime.handler.current_job", "echomq.tasks.canvas.chain",
                 "echomq.tasks.canvas.group", "echomq.tasks.canvas.flow",
                 "echomq.tasks.worker.run_worker"):
        assert page.index(f"::: {path}\n") < low, path
    assert "inherited_members: true" in page[:page.index("## The task object")]
    assert page.index("::: echomq.verbs.jobs.claims.Claim") > low
