#!/bin/bash
# tsan_train.sh - a short training on 2 threads for make test-tsan: copy
# with AdamW and dropout 0.1, evaluated and saved, then the same run on 1
# thread.  The run exits 0 with no ThreadSanitizer report (a report makes
# the program exit 66 at its end), and the two checkpoints are the same
# bytes (results do not depend on the thread count).  Not part of make test:
# cli_train.sh checks 1 and 2 threads alike on the plain build.
A=${ATTOGRAD:-./build-tsan/attograd}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
need_binary

run="train --steps 12 --eval-every 6 --log-every 6 --d-model 96 --batch 16 --optimizer adamw --dropout 0.1 --seed 3"
for n in 2 1; do
    # shellcheck disable=SC2086
    "$A" $run --threads $n --save "$tmp/t$n.st" >"$tmp/out$n.txt" 2>&1
    rc=$?
    check "train --threads $n exits 0 (exited $rc)" [ $rc -eq 0 ]
    if grep -q ThreadSanitizer "$tmp/out$n.txt"; then
        fail "train --threads $n: ThreadSanitizer reported:"
        cat "$tmp/out$n.txt"
    else
        ok
    fi
done
check "the checkpoints of 2 threads and of 1 are the same bytes" cmp -s "$tmp/t2.st" "$tmp/t1.st"
finish
