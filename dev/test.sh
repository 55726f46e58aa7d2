#!/usr/bin/env bash
# Install the package with its test extras into .venv, then lint, type-check, check the
# layers contract and test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
.venv/bin/ruff check echomq tests bench examples
.venv/bin/mypy
.venv/bin/lint-imports --no-cache   # the layers contract: imports flow down the folders
.venv/bin/python -m pytest -q "$@"
