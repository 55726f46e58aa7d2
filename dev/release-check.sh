#!/usr/bin/env bash
# Release readiness, as a team installs EchoMQ from a package index: build the sdist and the
# wheel, check their metadata (twine check: license, classifiers, project URLs, the README as
# the long description), then install into fresh venvs outside the repository and run a job:
#   1. without a C compiler (CC=/bin/false, the sdist built into a wheel): the install works,
#      the native module is reported missing in one line, and wire 4 runs a job;
#   2. with one (the wheel built above): the module is built, and wire 6 runs a job.
# Each checks that `echomq --version` prints the package's one version.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
WORK=$(mktemp -d /tmp/echomq-release.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
unset PYTHONPATH

"$PY" -m pip install -q 'build>=1.2' 'twine>=5.1'
VERSION=$("$PY" -c 'import ast, pathlib; print(next(n.value.value for n in ast.parse(pathlib.Path("echomq/__init__.py").read_text()).body if isinstance(n, ast.Assign) and n.targets[0].id == "__version__"))')
echo "== build echomq $VERSION: sdist and wheel"
"$PY" -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
SDIST=$(ls "$WORK"/dist/echomq-"$VERSION".tar.gz)
WHEEL=$(ls "$WORK"/dist/echomq-"$VERSION"-*.whl)
echo "== twine check"
"$PY" -m twine check --strict "$SDIST" "$WHEEL"

check_version() {  # $1: a venv
  local got
  got=$("$1/bin/echomq" --version)
  [ "$got" = "echomq $VERSION" ] || { echo "echomq --version says '$got', not 'echomq $VERSION'"; exit 1; }
  echo "$got"
}

echo "== 1. no C compiler: the sdist built into a wheel with CC=/bin/false"
"$PY" -m venv "$WORK/nocc"
CC=/bin/false "$WORK/nocc/bin/pip" wheel -v --no-deps -w "$WORK/nocc-dist" "$SDIST" \
  >"$WORK/nocc-build.log" 2>&1 || { tail -30 "$WORK/nocc-build.log"; exit 1; }
# the build says it skipped the module in one line, and why
grep -m1 "WARNING: skipping the EMQ native module" "$WORK/nocc-build.log" \
  || { echo "the compiler-less build did not report the missing native module"; tail -30 "$WORK/nocc-build.log"; exit 1; }
"$WORK/nocc/bin/pip" install -q "$WORK"/nocc-dist/echomq-*.whl
check_version "$WORK/nocc"
(cd "$WORK" && "$WORK/nocc/bin/python" "$ROOT/dev/release_smoke.py" 4) | tee "$WORK/nocc.out"
grep -q "native module: missing (" "$WORK/nocc.out"
# wire 6 refuses in one line, naming why there is no module
if (cd "$WORK" && "$WORK/nocc/bin/python" "$ROOT/dev/release_smoke.py" 6) >"$WORK/nocc6.out" 2>&1; then
  echo "wire 6 ran without the native module"; exit 1
fi
tail -1 "$WORK/nocc6.out"

echo "== 2. with a C compiler: the wheel built above"
"$PY" -m venv "$WORK/cc"
"$WORK/cc/bin/pip" install -q "$WHEEL"
check_version "$WORK/cc"
(cd "$WORK" && "$WORK/cc/bin/python" "$ROOT/dev/release_smoke.py" 6) | tee "$WORK/cc.out"
grep -q "native module: built" "$WORK/cc.out"
echo "release check: passed"
