# shellcheck shell=bash
# harness.sh - the counters and checks the command-line tests share (sourced,
# not run: make test runs tests/cli_*.sh).  ok / fail / skip count one result;
# check WHAT CMD... counts CMD's success; finish prints "N passed, N failed"
# (and ", N skipped" when any were) and exits non-zero when anything failed;
# need_binary makes $A the absolute path of the binary under test, or finishes.
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
