"""Module paths from before the layout move: each still imports for one release and warns
naming the new path; the public verb modules import by their top-level path silently."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from echomq import _moved


def test_every_old_path_reads_through_to_its_new_module_with_a_warning() -> None:
    for old, new in _moved.MOVED.items():
        module = importlib.import_module(old)
        target = importlib.import_module(new)
        public = [n for n in vars(target) if not n.startswith("_")]
        if not public:
            continue
        name = public[0]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert getattr(module, name) is getattr(target, name)
        assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message)
                   for w in seen), (old, name)


def test_names_an_old_module_re_exported_or_renamed_still_resolve() -> None:
    for old, names in _moved.FORMERLY.items():
        module = importlib.import_module(old)
        for name, where in names.items():
            new, attr = where.split(":")
            with pytest.warns(DeprecationWarning, match=f"import {attr} from {new}"):
                value = getattr(module, name)
            assert value is getattr(importlib.import_module(new), attr)


def test_the_documented_old_path_warns_and_works_in_a_fresh_interpreter() -> None:
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    from echomq.worker import Worker\nexcept DeprecationWarning as w:\n"
            "    print(w)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "echomq.worker.Worker moved: import Worker from echomq.tasks.worker" in done.stdout


def test_public_module_paths_do_not_warn() -> None:
    code = ("import warnings; warnings.simplefilter('error')\n"
            "from echomq.errors import KindError\nfrom echomq.jobs import Claim\n"
            "import echomq.flows, echomq.repeat, echomq.groups, echomq.dead, echomq.backoff\n"
            "import echomq, echomq.verbs.jobs\nassert echomq.jobs is echomq.verbs.jobs\n"
            "from echomq import Consumer, Job, current_job, Worker, EmbeddedServer\n"
            "from echomq import LocalCluster, Connector, AsyncConnector, chain, group\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
