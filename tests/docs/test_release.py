"""One version, written once (``echomq.__version__``): the build reads it from there
(pyproject's dynamic version) and ``echomq --version`` prints it. The package as a team
installs it (sdist, wheel, installs with and without a C compiler) is dev/release-check.sh,
which CI runs after the suite."""

from __future__ import annotations

import tomllib

import echomq
from tests.support.cli import echomq as run_echomq
from tests.support.paths import ROOT


def test_the_version_is_written_once_and_shown_by_the_cli() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "echomq.__version__"}
    done = run_echomq("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"echomq {echomq.__version__}"


def test_the_metadata_a_package_index_shows() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"  # an SPDX expression, not the deprecated table
    assert project["readme"]["file"] == "README.md"
    assert {"Homepage", "Documentation", "Changelog"} <= set(project["urls"])
    assert any(c.startswith("Programming Language :: Python :: 3.11")
               for c in project["classifiers"])
