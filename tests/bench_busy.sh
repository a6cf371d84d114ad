#!/bin/sh
# bench_busy.sh - `make bench-busy`: training on a machine busy with other
# work.  Times `attograd train` (the copy task, STEPS steps) with nothing
# else started, beside one busy loop per core, and beside another training
# run (default threads), each with:
#   one thread        --threads 1
#   default           every core, idle threads polling as long as src/pool.c
#                     decides from what it measures, then sleeping
#   passive           OMP_WAIT_POLICY=passive: idle threads sleep at once
#   never sleep       OMP_WAIT_POLICY=active: idle threads poll without end
# Each figure is the median wall time of RUNS runs of the whole process.
# The goal: beside other work the default threads are never slower than
# twice one thread, and alone they are within 5% of the best fixed setting.
# Environment: STEPS (default 100), RUNS (default 3), ATTOGRAD (default build/attograd).
# $args (options for every run) splits into words on purpose.
# shellcheck disable=SC2086
set -e
cd "$(dirname "$0")/.."
A=${ATTOGRAD:-build/attograd}
steps=${STEPS:-100}
runs=${RUNS:-3}
[ -n "${ATTOGRAD:-}" ] || make -s --no-print-directory all
cores=$(nproc)

# median wall seconds of $runs runs of: [VAR=VALUE] attograd train ... ARGS
wall() {
    for _ in $(seq "$runs"); do
        t0=$(date +%s%N)
        env "$@" "$A" train --steps "$steps" --eval-every 0 --quiet $args >/dev/null
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000000))
    done | sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] / 1000 }'
}

others=""
start_others() {    # start_others busy|training
    if [ "$1" = busy ]; then
        for _ in $(seq "$cores"); do
            sh -c 'while :; do :; done' &
            others="$others $!"
        done
    else
        "$A" train --steps 1000000000 --eval-every 0 --quiet >/dev/null 2>&1 &
        others="$others $!"
    fi
    sleep 1
}
stop_others() {
    for p in $others; do kill "$p" 2>/dev/null || true; done
    for p in $others; do wait "$p" 2>/dev/null || true; done
    others=""
}
trap stop_others EXIT INT TERM

echo "machine: $cores cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "attograd train --steps $steps --eval-every 0 --quiet (copy task); median wall seconds of $runs runs"
printf '%-12s | %9s | %9s | %9s | %11s | %s\n' "beside" "1 thread" "default" "passive" "never sleep" \
    "default / 1 thread, never sleep / 1 thread"
for beside in nothing busy training; do
    [ "$beside" = nothing ] || start_others "$beside"
    args="--threads 1"; one=$(wall X=1)
    args=""; short=$(wall X=1); passive=$(wall OMP_WAIT_POLICY=passive); long=$(wall OMP_WAIT_POLICY=active)
    stop_others
    label=$beside
    [ "$beside" = busy ] && label="$cores busy loops"
    [ "$beside" = training ] && label="a training"
    printf '%-12s | %9s | %9s | %9s | %11s | %s\n' "$label" "$one" "$short" "$passive" "$long" \
        "$(awk -v s="$short" -v l="$long" -v o="$one" 'BEGIN { printf "%.2f, %.2f", s / o, l / o }')"
done
