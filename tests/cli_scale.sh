#!/bin/bash
# cli_scale.sh - memory that grows with the context T, not T^2, and an
# estimate of it that holds: training at T = 64, 256, 1024 and 4096 with the
# same tokens per step (B T = 8192), the process's measured peak memory is
# within 25% of the estimate `train` checks before it starts (printed in its
# summary), and about the same at every T (attention keeps no [T,T]
# matrix); a run too big for the machine is refused, naming a batch and a
# context that would fit.  Run from the repository root; ATTOGRAD overrides
# ./build/attograd.
A=${ATTOGRAD:-./build/attograd}
ROOT=$(pwd)
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
need_binary
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-scale.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# peak and estimate (MB) from a summary line: "peak memory X MB (estimated Y MB)"
peaks=""
for T in 64 256 1024 4096; do
    B=$((8192 / T))
    "$A" train --text "$ROOT/data/tiny.txt" --layers 2 --heads 4 --d-model 64 --context $T --batch $B \
        --steps 2 --eval-every 0 --quiet >"$tmp/out" 2>&1
    line=$(grep -o 'peak memory [0-9.]* MB (estimated [0-9.]* MB)' "$tmp/out")
    peak=$(echo "$line" | sed -E 's/peak memory ([0-9.]+) MB.*/\1/')
    est=$(echo "$line" | sed -E 's/.*estimated ([0-9.]+) MB.*/\1/')
    if [ -z "$peak" ] || [ -z "$est" ]; then
        fail "T=$T: no memory line in the summary: $(tail -2 "$tmp/out")"
        continue
    fi
    check "T=$T B=$B: measured peak $peak MB within 25% of the estimate $est MB" \
        awk -v p="$peak" -v e="$est" 'BEGIN { exit !(p >= 0.75 * e && p <= 1.25 * e) }'
    peaks="$peaks $peak"
done
# a large text: its token ids (4 bytes a byte) are a run's largest part, and
# the estimate counts them (8 MB of text, 32 MB of ids, on a 3 MB model)
# (not under the sanitizers, make test-asan's ATTOGRAD_QUICK: AddressSanitizer
# keeps freed blocks in quarantine, and the text's read buffer, freed once
# tokenized, then counts in the peak: 118 MB against 85)
if [ -n "${ATTOGRAD_QUICK:-}" ]; then
    skip "an 8 MB text's memory estimate (a sanitizer's allocator keeps freed memory: ATTOGRAD_QUICK)"
else
    awk 'BEGIN { srand(7); for (i = 0; i < 1000000; i++) printf "%s ", substr("attention softmax mask query", 1 + int(rand() * 20), 7) }' \
        >"$tmp/big.txt"
    "$A" train --text "$tmp/big.txt" --steps 2 --eval-every 0 --quiet >"$tmp/out" 2>&1
    line=$(grep -o 'peak memory [0-9.]* MB (estimated [0-9.]* MB)' "$tmp/out")
    peak=$(echo "$line" | sed -E 's/peak memory ([0-9.]+) MB.*/\1/')
    est=$(echo "$line" | sed -E 's/.*estimated ([0-9.]+) MB.*/\1/')
    check "an 8 MB text: measured peak ${peak:-?} MB within 25% of the estimate ${est:-?} MB ($(tail -1 "$tmp/out"))" \
        awk -v p="$peak" -v e="$est" 'BEGIN { exit !(e > 0 && p >= 0.75 * e && p <= 1.25 * e) }'
fi
# linear in T: with B T fixed, the peak at T = 4096 is within 20% of T = 64's
set -- $peaks
if [ $# -eq 4 ]; then
    check "peak memory at T=4096 ($4 MB) within 1.2x of T=64 ($1 MB)" \
        awk -v a="$1" -v b="$4" 'BEGIN { exit !(b <= 1.2 * a) }'
fi

# too big: refused before anything is allocated, with what would fit
"$A" train --text "$ROOT/data/tiny.txt" --layers 6 --heads 6 --d-model 384 --context 4096 --batch 4000 \
    --steps 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a run too big for memory exits 2 (got $rc)" test "$rc" -eq 2
check "the refusal is one line naming a batch and a context that fit: $(cat "$tmp/err")" \
    grep -qE '^attograd train: this run needs about [0-9.]+ GB .*--batch [0-9]+ would fit, or --context [0-9]+ at --batch 4000$' "$tmp/err"
check "the refusal is one line" test "$(wc -l <"$tmp/err")" -eq 1
# not even one sequence of the full context fits, a shorter context does:
# the context alone is named (it had said "--batch 0 would fit")
awk 'BEGIN { for (i = 0; i < 15000; i++) printf "line %d of a text long enough for any context\n", i }' >"$tmp/long.txt"
mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ -n "$mem_kb" ] && [ "$mem_kb" -lt 100000000 ]; then
    "$A" train --text "$tmp/long.txt" --layers 32 --heads 8 --d-model 512 --context 65536 --batch 1 \
        --steps 1 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    check "a run whose single sequence is too long for memory exits 2 (got $rc)" test "$rc" -eq 2
    check "... and the refusal names the context that fits at --batch 1, no batch: $(cat "$tmp/err")" \
        grep -qE '^attograd train: this run needs about [0-9.]+ GB .*: --context [0-9]+ would fit at --batch 1$' "$tmp/err"
else
    skip "a machine with 100 GB or more holds the run meant to be too long for memory"
fi
finish
