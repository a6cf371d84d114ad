#!/bin/sh
# run.sh - run every test program given on the command line and add up their
# closing "N passed, N failed" lines.  A program that crashes, or ends
# without that line, counts as one failure.  Prints the total last.
passed=0; failed=0; skipped=0
for t in "$@"; do
    log=$(mktemp)
    "$t" >"$log" 2>&1
    rc=$?
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$last" ]; then
        cat "$log"
        echo "$t: exited $rc without a summary line"
        failed=$((failed + 1))
    else
        p=$(echo "$last" | sed -E 's/^([0-9]+) passed.*/\1/')
        f=$(echo "$last" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
        s=$(echo "$last" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
        passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
        if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
            grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$log"
            [ "$f" -eq 0 ] && { echo "$t: exited $rc"; failed=$((failed + 1)); }
        fi
        printf '%-36s %s\n' "$(basename "$t")" "$last"
    fi
    rm -f "$log"
done
if [ "$skipped" -ne 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
