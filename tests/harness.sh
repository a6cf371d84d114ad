# shellcheck shell=bash
# harness.sh - the counters and checks the command-line tests share (sourced,
# not run: make test runs tests/cli_*.sh).  ok / fail / skip count one result;
# check WHAT CMD... counts CMD's success; finish prints "N passed, N failed"
# (and ", N skipped" when any were) and exits non-zero when anything failed;
# need_binary makes $A the absolute path of the binary under test, or finishes;
# bf16_probe tells whether bf16 training runs here; set_meta edits a
# checkpoint's metadata.
passed=0; failed=0; skipped=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
skip() { skipped=$((skipped + 1)); echo "skipped: $*"; }
check() { local what=$1; shift; if "$@"; then ok; else fail "$what"; fi; }
finish() {
    if [ "$skipped" -ne 0 ]; then
        echo "$passed passed, $failed failed, $skipped skipped"
    else
        echo "$passed passed, $failed failed"
    fi
    [ "$failed" -eq 0 ]
    exit
}
need_binary() {
    if [ ! -x "$A" ]; then fail "no binary at $A (run make first)"; finish; fi
    A=$(cd "$(dirname "$A")" && pwd)/$(basename "$A")     # the tests run in other directories
}
# bf16_probe BINARY: 0 when BINARY trains a step in bf16; 1 when bf16 is
# turned off (AG_BF16_KERNEL=none: exit 2 saying so; the caller skips); any
# other outcome (a crash, another error) counts as a failure and returns 1.
bf16_probe() {
    local out rc
    out=$("$1" train --precision bf16 --steps 1 --quiet 2>&1)
    rc=$?
    [ $rc -eq 0 ] && return 0
    if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -q "turned off by AG_BF16_KERNEL"; then
        return 1
    fi
    fail "the bf16 probe of $1 exited $rc: $(printf '%s' "$out" | head -c 300)"
    return 1
}
# set_meta FROM TO KEY=VALUE...: TO is checkpoint FROM with those metadata
# values set (a hand edit), its header padded to 8 bytes as written.
set_meta() {
    python3 - "$@" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
for kv in sys.argv[3:]:
    k, v = kv.split('=', 1)
    h['__metadata__'][k] = v
j = json.dumps(h).encode()
j += b' ' * (-len(j) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(j)) + j + b[8 + n:])
PY
}
