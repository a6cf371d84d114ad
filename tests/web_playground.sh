#!/bin/sh
# web_playground.sh - the browser playground (make web) in headless Chromium:
# tests/web/playground.js drives the page through its labelled controls
# (training, heatmaps, checkpoints against the reference build's bytes,
# completion against `attograd sample`, size, responsiveness).  Skipped, with
# the reason, where emscripten, Chromium, node or the test's npm package is
# missing (sh tests/install-deps.sh installs them).  Run from the repository
# root; ATTOGRAD_REF names the reference build's binary.
REF=${ATTOGRAD_REF:-./build-ref/attograd}
skip() { echo "skipped: $*"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
command -v emcc >/dev/null 2>&1 || skip "no emcc (Debian's emscripten package) to build the page"
command -v node >/dev/null 2>&1 || skip "no node to drive the browser"
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || skip "no Chromium at ${CHROMIUM:-/usr/bin/chromium}"
[ -d tests/web/node_modules/playwright-core ] || skip "no playwright-core in tests/web/node_modules (npm ci in tests/web)"
if [ ! -x "$REF" ]; then echo "FAIL: no reference build at $REF (make REFERENCE=1)"; echo "0 passed, 1 failed"; exit 1; fi
if ! make -s web >/tmp/attograd-web-build.$$ 2>&1; then
    cat /tmp/attograd-web-build.$$; rm -f /tmp/attograd-web-build.$$
    echo "FAIL: make web"; echo "0 passed, 1 failed"; exit 1
fi
rm -f /tmp/attograd-web-build.$$
WEBDIR=build-web ATTOGRAD_REF=$REF exec node tests/web/playground.js
