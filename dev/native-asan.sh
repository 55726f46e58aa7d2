#!/usr/bin/env bash
# Run the native tests against an AddressSanitizer build of the EMQ module.
#
# The module is rebuilt with -fsanitize=address (+ LeakSanitizer) into a temp dir, and every
# valkey-server the tests start runs with the ASan runtime preloaded (the server binary
# itself is not instrumented: its malloc/free are intercepted, our code is checked for
# invalid accesses, and leaks are reported at shutdown). Reports go to $OUT/asan.<pid>.
#
# Fails if the tests fail or if ASan/LSan writes any report (an invalid access anywhere, or
# a leak, which at a clean shutdown of this server build means one of ours: a clean run
# writes none). Checked once by injecting a leak into a copy of emq.c: LSan reported it
# under ValkeyModuleCommandDispatcher and the script failed.
#
#   bash dev/native-asan.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-$(mktemp -d /tmp/emq-asan.XXXXXX)}
CC=${CC:-gcc}
SRC=${SRC:-echomq/native}  # another copy of the sources (e.g. one with a bug injected)
LIBASAN=$($CC -print-file-name=libasan.so)
[ -f "$LIBASAN" ] || { echo "no libasan for $CC" >&2; exit 2; }
VALKEY=$($PY -c 'from echomq.embedded.server import binary_path; print(binary_path())')

$CC -std=c99 -g -O1 -fno-omit-frame-pointer -fsanitize=address -fPIC -fvisibility=hidden \
    -Wall -Wextra -shared -o "$OUT/emq-asan.so" "$SRC"/emq*.c

# Valkey dlopens modules with RTLD_DEEPBIND, which the ASan runtime refuses. A tiny
# preloaded shim drops that flag before the call reaches ASan's own dlopen (the shim comes
# first in LD_PRELOAD, hence verify_asan_link_order=0).
cat > "$OUT/nodeepbind.c" <<'SHIM'
#define _GNU_SOURCE
#include <dlfcn.h>
void *dlopen(const char *file, int mode) {
    static void *(*next)(const char *, int);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "dlopen");
    return next(file, mode & ~RTLD_DEEPBIND);
}
SHIM
$CC -shared -fPIC -o "$OUT/nodeepbind.so" "$OUT/nodeepbind.c" -ldl

# wrappers the tests run instead of the plain server binaries
wrap() {
    cat > "$OUT/$1" <<WRAP
#!/bin/sh
export LD_PRELOAD="$OUT/nodeepbind.so $LIBASAN"
export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=1:log_path=$OUT/asan:detect_odr_violation=0"
exec "$2" "\$@"
WRAP
    chmod +x "$OUT/$1"
}
wrap valkey-server "$VALKEY"
REDIS=${REDIS:-/usr/bin/redis-server}
[ -x "$REDIS" ] && wrap redis-server "$REDIS"

echo "ASan module: $OUT/emq-asan.so; reports: $OUT/asan.*"
status=0
# (the one test left out dlopens the module into Python itself, which an ASan build cannot do)
ECHOMQ_NATIVE_MODULE="$OUT/emq-asan.so" ECHOMQ_VALKEY_SERVER="$OUT/valkey-server" \
ECHOMQ_REDIS_SERVER="$OUT/redis-server" \
    $PY -m pytest -q -p no:cacheprovider tests/native \
    -k "not loadable_plain_c_object" "$@" || status=$?

reports=$(ls "$OUT"/asan.* 2>/dev/null || true)
for r in $reports; do cat "$r"; done
echo "ASan/LSan: $(echo "$reports" | wc -w) report file(s) (0 = no invalid access, no leak)"
[ -z "$reports" ] || status=1
exit $status
