#!/usr/bin/env bash
# Install the package with its test and docs extras into .venv, then lint, type-check, check
# the layers contract, build the docs site (strict: a broken link or a stale generated page
# fails) and test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q 'setuptools>=77'  # the tests rebuild the native module in place when its C is newer
.venv/bin/python -m pip install -q -e '.[test,docs]'
.venv/bin/ruff check echomq tests bench examples
.venv/bin/mypy
.venv/bin/lint-imports --no-cache   # the layers contract: imports flow down the folders
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict  # the site into site/ (not --quiet: it hides, so forgives, the warnings)
.venv/bin/python -m pytest -q "$@"
