#!/bin/sh
# bench_threads.sh - `make bench-threads`: the default threads against the
# fixed settings, per config, on the machine it runs on.  Usage:
# sh tests/bench_threads.sh [toy|small|medium]...  A change that helps one CPU
# and hurts another shows here.  Settings (tests/bench_train.c, one process
# each):
#   1 thread       --threads 1
#   sleep at once  all threads, OMP_WAIT_POLICY=passive: an idle thread sleeps
#   never sleep    all threads, OMP_WAIT_POLICY=active: an idle thread polls
#   default        all threads as src/pool.c decides from what it measures
# The settings take turns, RUNS rounds (default 3), and each figure is the
# median over the rounds of bench_train's median step time, so a machine
# whose speed drifts slows all settings alike.  default/best is the default
# over the fastest fixed setting (goal: at most 1.05).
# Environment: RUNS, BENCH_THREADS (default: every core), CC.
set -e
cd "$(dirname "$0")/.."
configs=${*:-toy small medium}
runs=${RUNS:-3}
threads=${BENCH_THREADS:-$(nproc)}
for c in $configs; do
    case $c in
    toy | small | medium) ;;
    *) echo "bench_threads.sh: '$c' is not a config (toy, small, medium)" >&2; exit 2 ;;
    esac
done
make -s --no-print-directory build/bench_train CC="${CC:-cc}"
B=./build/bench_train

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p')
family=$(sed -n 's/^cpu family[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
model=$(sed -n 's/^model[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "machine: ${cpu:-unknown CPU} (family ${family:-?} model ${model:-?}), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$B" --threads "$threads" 1x1x8x8x1x1 | sed -n 's/^threads measured/threads measured/p'
echo "ms per step: median of $runs rounds (settings in turn) of bench_train's median step; $threads threads but in the first column"
echo

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# one step time: ms SETTING CONFIG
ms() {
    case $1 in
    one) "$B" --threads 1 "$2" ;;
    passive) OMP_WAIT_POLICY=passive "$B" --threads "$threads" "$2" ;;
    active) OMP_WAIT_POLICY=active "$B" --threads "$threads" "$2" ;;
    default) "$B" --threads "$threads" "$2" ;;
    esac | awk '$1 == "config" { for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1) }'
}
for c in $configs; do
    for _ in $(seq "$runs"); do
        for s in one passive active default; do
            echo "$c $s $(ms $s "$c")" >>"$out"
        done
    done
done

med() { awk -v c="$1" -v s="$2" '$1 == c && $2 == s { v[++n] = $3 } END {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    printf "%.3f", n ? v[int((n + 1) / 2)] : 0 }' "$out"; }
row='%-7s | %9s | %13s | %11s | %9s | %s\n'
printf "$row" config "1 thread" "sleep at once" "never sleep" default "default / best fixed"
for c in $configs; do
    one=$(med "$c" one); passive=$(med "$c" passive); active=$(med "$c" active); def=$(med "$c" default)
    printf "$row" "$c" "$one" "$passive" "$active" "$def" "$(awk -v o="$one" -v p="$passive" -v a="$active" -v d="$def" \
        'BEGIN { b = o; if (p < b) b = p; if (a < b) b = a; printf "%.2f", d / b }')"
done
