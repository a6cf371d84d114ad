#!/bin/bash
# cli_bf16.sh - --precision bf16 (mixed precision: bf16 inputs to every matrix
# multiply, fp32 sums, everything else fp32).  It learns the copy task like
# fp32 (>= 99% held-out); on 300 AdamW steps of text its loss stays within 2%
# of fp32's at every logged step (measured: at most 1.2%, at most 0.1% for
# most steps); a resumed bf16 run continues bit for bit (N + N steps = 2N,
# the same checkpoint bytes); eval and sample take it; bad values,
# AG_BF16_KERNEL=none and an AG_BF16_KERNEL that names no kernel get one
# line and exit 2; a bf16 run names its kernel, and AG_BF16_KERNEL picks
# it (the fp32 kernel, which every CPU has, or the best the CPU has below
# the one named).  The learning checks run on the kernel chosen here.
A=${ATTOGRAD:-./build/attograd}
ROOT=$(pwd)
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
need_binary
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-bf16.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# bad WANT ARGS...: exit 2 and one stderr line containing WANT
bad() {
    local want=$1; shift
    "$A" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    check "$* exits 2 (got $rc)" test "$rc" -eq 2
    check "$*: one line naming '$want': $(cat "$tmp/err")" \
        sh -c "test \"\$(wc -l <'$tmp/err')\" -eq 1 && grep -q -- '$want' '$tmp/err'"
}
bad "is not a precision" train --precision fp16 --steps 1
bad "is not a precision" eval --model /nonexistent --precision half
AG_BF16_KERNEL=none bad "bf16" train --precision bf16 --steps 1
AG_BF16_KERNEL=bogus bad "AG_BF16_KERNEL=bogus is not one of amx, avx512, fp32, none" train --precision bf16 --steps 1

if ! bf16_probe "$A"; then
    if [ -n "$AG_BF16_KERNEL" ]; then
        skip "AG_BF16_KERNEL=$AG_BF16_KERNEL in the environment turns bf16 off"
    else
        check "bf16 runs on every CPU (the fp32 kernel), but the probe did not" false
    fi
    finish
fi

# the run's configuration line names the bf16 kernel, and it is the one asked for
kernel_of() { sed -nE 's/.*bf16 matrix multiplies \(([a-z0-9]+) kernel\).*/\1/p' "$1"; }
"$A" train --precision bf16 --steps 1 >"$tmp/out" 2>&1
auto=$(kernel_of "$tmp/out")
check "a bf16 run names its kernel ($(grep ' run ' "$tmp/out"))" \
    grep -Eq "bf16 matrix multiplies \((amx|avx512|fp32) kernel\)" "$tmp/out"
AG_BF16_KERNEL=fp32 "$A" train --precision bf16 --steps 1 >"$tmp/out" 2>&1
check "AG_BF16_KERNEL=fp32: the run names the fp32 kernel ($(grep ' run ' "$tmp/out"))" \
    test "$(kernel_of "$tmp/out")" = fp32
# avx512 and amx: that kernel, or the best below it this CPU has
AG_BF16_KERNEL=avx512 "$A" train --precision bf16 --steps 1 >"$tmp/out" 2>&1
k512=$(kernel_of "$tmp/out")
AG_BF16_KERNEL=amx "$A" train --precision bf16 --steps 1 >"$tmp/out" 2>&1
kamx=$(kernel_of "$tmp/out")
check "AG_BF16_KERNEL=avx512 runs avx512 or fp32 ($k512), amx runs amx or the avx512 one ($kamx)" \
    sh -c "{ test '$k512' = avx512 || test '$k512' = fp32; } && { test '$kamx' = amx || test '$kamx' = '$k512'; }"
check "unset, the kernel chosen ($auto) is one of those: amx where amx runs, else avx512 or fp32" \
    sh -c "if test '$kamx' = amx; then test '$auto' = amx; else test '$auto' = fp32 || test '$auto' = '$k512'; fi"
"$A" train --steps 1 >"$tmp/out" 2>&1
check "an fp32 run names no bf16 kernel" eval '! grep -q "kernel)" "$tmp/out"'

acc() { sed -nE 's/.*held-out exact match ([0-9.]+)%.*/\1/p' "$1"; }
if [ -n "$ATTOGRAD_QUICK" ]; then
    skip "learning runs skipped under ATTOGRAD_QUICK"
else
    "$A" train --precision bf16 --seed 1 --quiet --save "$tmp/copy.st" >"$tmp/copy" 2>&1
    check "copy in bf16 reaches >= 99% held-out ($(acc "$tmp/copy")%)" \
        awk -v a="$(acc "$tmp/copy")" 'BEGIN { exit !(a != "" && a >= 99) }'
    check "the checkpoint records the precision" grep -q '"precision":"bf16"' "$tmp/copy.st"
    for p in fp32 bf16; do
        "$A" train --text "$ROOT/data/tiny.txt" --optimizer adamw --lr 3e-3 --steps 300 --context 32 --batch 16 \
            --eval-every 0 --log-every 25 --precision $p --log "$tmp/curve_$p.csv" --quiet >/dev/null 2>&1
    done
    check "bf16 text loss within 2% of fp32's at every logged step: $(paste -d, "$tmp/curve_fp32.csv" \
        "$tmp/curve_bf16.csv" | awk -F, 'NR > 1 { d = ($9 - $2) / $2; printf "%.4f ", d }')" \
        awk -F, 'NR == FNR { if (FNR > 1) f[$1] = $2; next }
                 FNR > 1 { n++; d = ($2 - f[$1]) / f[$1]; if (d < -0.02 || d > 0.02) bad = 1 }
                 END { exit bad || n != 12 }' "$tmp/curve_fp32.csv" "$tmp/curve_bf16.csv"
    check "... and bf16 is not fp32 again (some logged loss differs)" \
        sh -c "! cmp -s '$tmp/curve_fp32.csv' '$tmp/curve_bf16.csv'"
fi

# resume: 20 + 20 steps with dropout give the bytes of 40 in one run
run="--text $ROOT/data/tiny.txt --precision bf16 --d-model 32 --heads 2 --layers 2 --context 16 --batch 8
     --dropout 0.1 --optimizer adamw --eval-every 0 --quiet"
# shellcheck disable=SC2086
"$A" train $run --steps 40 --save "$tmp/whole.st" >/dev/null 2>&1
# shellcheck disable=SC2086
"$A" train $run --steps 20 --save "$tmp/half.st" >/dev/null 2>&1
"$A" train --resume "$tmp/half.st" --steps 40 --quiet >/dev/null 2>&1
check "bf16 resume: 20 + 20 steps equal 40 (same checkpoint bytes)" cmp -s "$tmp/whole.st" "$tmp/half.st"
bad "--precision cannot be changed with --resume" train --resume "$tmp/half.st" --precision fp32 --steps 41

# eval and sample in bf16: the loss close to fp32's
l32=$("$A" eval --model "$tmp/whole.st" --text "$ROOT/data/tiny.txt" 2>/dev/null | sed -nE 's/^loss ([0-9.]+).*/\1/p')
l16=$("$A" eval --model "$tmp/whole.st" --text "$ROOT/data/tiny.txt" --precision bf16 2>/dev/null |
      sed -nE 's/^loss ([0-9.]+).*/\1/p')
check "eval --precision bf16: loss $l16 within 1% of fp32's $l32" \
    awk -v a="$l16" -v b="$l32" 'BEGIN { exit !(a != "" && b != "" && a != b && (a - b) / b < 0.01 && (b - a) / b < 0.01) }'
out=$("$A" sample --model "$tmp/whole.st" --prompt "The " --tokens 20 --seed 3 --precision bf16 2>/dev/null)
check "sample --precision bf16 prints the prompt and 20 more bytes (got ${#out})" test "${#out}" -eq 24
finish
