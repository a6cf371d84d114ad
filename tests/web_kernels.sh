#!/bin/sh
# web_kernels.sh - the browser build's kernels (src/kernels/wasm_*.c) against
# the reference's, bit for bit: tests/web/kernels.c compiled by emscripten
# and run under node.  Skipped, with the reason, where emcc or node is
# missing (sh tests/install-deps.sh installs them).  Run from the
# repository root.
skip() { echo "skipped: $*"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
command -v emcc >/dev/null 2>&1 || skip "no emcc (Debian's emscripten package) to build the kernels"
command -v node >/dev/null 2>&1 || skip "no node to run them"
if ! make -s build-web/kernels.js >/tmp/attograd-web-kernels.$$ 2>&1; then
    cat /tmp/attograd-web-kernels.$$; rm -f /tmp/attograd-web-kernels.$$
    echo "FAIL: make build-web/kernels.js"; echo "0 passed, 1 failed"; exit 1
fi
rm -f /tmp/attograd-web-kernels.$$
exec node build-web/kernels.js
