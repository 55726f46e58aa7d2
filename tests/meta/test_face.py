"""The public face: ``echomq`` and its public modules (``echomq.jobs``, ``echomq.errors``, ...)
are plain modules whose ``__all__`` names resolve, that re-export what their private layer
defines (the same objects), and that expose every name DESIGN.md's contract calls."""

from __future__ import annotations

import ast
import importlib
import pathlib
import subprocess
import sys
import types

import pytest

import echomq

PUBLIC_MODULES = sorted(n for n in echomq.__all__
                        if isinstance(getattr(echomq, n), types.ModuleType))
# the faces that show a chosen part of their layer (the reads the guides teach); every other
# face re-exports all its layer's public names
CHOSEN = {"doctor", "payload", "taskmetrics", "workers"}
# packages of their own, not faces over a layer
OWN = {"native", "scripts"}

# every attribute DESIGN.md §3-§3e calls on a public module
CONTRACT: dict[str, tuple[str, ...]] = {
    "jobs": ("enqueue", "enqueue_at", "enqueue_in", "promote", "claim", "claim_many", "ack",
             "retry", "delay", "reschedule", "reap", "counts", "cancel", "pause", "resume",
             "is_paused", "Claim"),
    "repeat": ("register", "cancel", "due", "count", "advance", "upsert", "trigger",
               "backfill", "pause"),
    "groups": ("pause", "resume", "set_limit", "stats", "GroupStats"),
    "errors": ("EchoMQError", "KindError", "StaleError", "GoneError", "StateError",
               "JobExpired"),
    "backoff": ("delay_ms",),
    "ids": ("mint",),
    "keyspace": ("job_key", "queue_key"),
    "scripts": ("source",),
    "native": ("module_path",),
}
TOP_LEVEL = ("Connector", "AsyncConnector", "jobs", "repeat", "backoff", "ids", "keyspace",
             "scripts", "native", "errors", "groups", "Consumer", "Job", "current_job",
             "Worker", "EmbeddedServer", "LocalCluster", "chain", "group", "App", "Fail",
             "Retry", "Delay", "RateLimited", "Pump", "run_worker")


def _layer(face: types.ModuleType) -> str:
    """The private module a face re-exports: the one its import statement names."""
    tree = ast.parse(pathlib.Path(face.__file__ or "").read_text())
    [source] = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)
                and n.module not in (None, "__future__")}
    assert source is not None
    return source


def _defined(module: types.ModuleType) -> set[str]:
    """A module's public names: its ``__all__``, else what its top level defines."""
    if hasattr(module, "__all__"):
        return set(module.__all__)
    names: set[str] = set()
    for node in ast.parse(pathlib.Path(module.__file__ or "").read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_every_name_in_every_all_resolves() -> None:
    for name in echomq.__all__:
        assert getattr(echomq, name) is not None, name
    for face in PUBLIC_MODULES:
        module = getattr(echomq, face)
        names = _defined(module)  # native and scripts, packages of their own, have no __all__
        assert names, face
        for name in names:
            assert hasattr(module, name), f"echomq.{face}.{name}"


@pytest.mark.parametrize("face", sorted(set(PUBLIC_MODULES) - OWN))
def test_a_face_is_a_plain_module_over_one_layer(face: str) -> None:
    module = importlib.import_module(f"echomq.{face}")
    assert module.__name__ == f"echomq.{face}" and module.__file__, face
    assert module.__file__.endswith(f"echomq/{face}.py")
    layer = importlib.import_module(_layer(module))
    assert layer is not module and layer.__name__.startswith(("echomq.core.", "echomq.verbs."))
    for name in module.__all__:  # the same objects, so `except errors.KindError` and
        assert getattr(module, name) is getattr(layer, name), name  # isinstance hold
    if face not in CHOSEN:
        missing = _defined(layer) - set(module.__all__)
        assert not missing, f"echomq/{face}.py does not export {sorted(missing)}"
    extra = set(vars(module)) - set(module.__all__) - {"annotations"}
    # "@py_builtins"/"@pytest_ar": pytest's assertion rewriting, when the plugin's
    # entry point marked the package for it and a pytester run re-imported the face
    assert not {n for n in extra if not n.startswith(("__", "@py"))}, f"{face}: {extra}"


def test_the_public_modules_expose_what_design_md_calls() -> None:
    for face, names in CONTRACT.items():
        module = getattr(echomq, face)
        for name in names:
            assert name in _defined(module), f"echomq.{face}.{name}"
            assert callable(getattr(module, name)), f"echomq.{face}.{name}"
    for name in TOP_LEVEL:
        assert name in echomq.__all__, name


def test_the_contract_import_forms_in_a_fresh_interpreter() -> None:
    code = (
        "import sys, warnings; warnings.simplefilter('error')\n"
        "from echomq import Connector, AsyncConnector, jobs, repeat, backoff, ids, keyspace, "
        "scripts, native, errors\n"
        "import echomq.jobs\n"
        "from echomq.errors import KindError\n"
        "from echomq.jobs import Claim\n"
        "import echomq.flows, echomq.repeat, echomq.groups, echomq.dead, echomq.backoff\n"
        "import echomq.verbs.jobs, echomq.core.errors\n"
        "assert echomq.jobs is jobs and sys.modules['echomq.jobs'] is jobs\n"
        "assert Claim is echomq.verbs.jobs.Claim and KindError is echomq.core.errors.KindError\n"
        "assert not [f for f in sys.meta_path if type(f).__module__.startswith('echomq')]\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_path_that_was_never_public_does_not_import() -> None:
    for old in ("echomq.worker", "echomq.jobs.claims", "echomq.consumer"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
    with pytest.raises(AttributeError):
        echomq.worker  # type: ignore[attr-defined]  # noqa: B018
