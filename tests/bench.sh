#!/bin/sh
# bench.sh - `make bench`: one training step's speed in attograd and in PyTorch
# on the same models, as a table.  Usage: sh tests/bench.sh [toy|small|medium]...
# Environment: BENCH_THREADS (default 2), CC, PYTHON (default /usr/bin/python3).
set -e
cd "$(dirname "$0")/.."
threads=${BENCH_THREADS:-2}
configs=${*:-toy small medium}
cc=${CC:-cc}
py=${PYTHON:-/usr/bin/python3}
for c in $configs; do
    case $c in
    toy | small | medium) ;;
    *) echo "bench.sh: '$c' is not a config (toy, small, medium)" >&2; exit 2 ;;
    esac
done

openmp=$(printf 'int main(void){return 0;}' | $cc -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp || true)
make -s --no-print-directory all build/libtrain.a
$cc -std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno -O3 -march=native $openmp -Iinclude -Isrc -Itrain \
    tests/bench_train.c build/libtrain.a build/libattograd.a -lm -o build/bench_train

echo "machine: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "compiler: $($cc --version | head -n 1)"
echo "threads: $threads (attograd and torch)"

# Each config in its own process, so peak RSS is that config's alone.
ours=$(mktemp)
theirs=$(mktemp)
trap 'rm -f "$ours" "$theirs" "$ours.row"' EXIT
for c in $configs; do
    ./build/bench_train --threads "$threads" "$c" | grep '^config' >>"$ours"
done
# memory must stay flat across steps: 1000 more toy steps
soak=$(./build/bench_train --threads "$threads" --soak 1000 toy | grep '^soak' || true)
if "$py" -c 'import torch' 2>/dev/null; then
    "$py" tests/bench_torch.py --threads "$threads" $configs >"$theirs"
    echo "torch: $("$py" -c 'import torch; print(torch.__version__)')"
else
    echo "note: PyTorch not importable by $py; its column is skipped"
fi
echo "GFLOP/s = (6 * params * B*T + 12 * n_layer * B * T^2 * d) / median step time; peak RSS of attograd's process"
echo "memory = (peak RSS - RSS at the process's start) / (parameters + gradients + optimizer state + arena peak)"
echo

# value after a key on a "config NAME key value key value ..." line
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"; }

printf '%-7s | %16s | %15s | %18s | %9s | %8s | %21s | %s\n' config "attograd ms/step" "PyTorch ms/step" \
    "attograd / PyTorch" tokens/s GFLOP/s "peak RSS (MB)" "memory"
for c in $configs; do
    grep "^config $c " "$ours" >"$ours.row" || true
    ms=$(field "$ours.row" ms/step)
    tms=$(grep "^config $c " "$theirs" | awk '{ for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1) }')
    ratio=$(awk -v a="$ms" -v b="$tms" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')
    rss=$(field "$ours.row" peak_rss_MB)
    start=$(field "$ours.row" start_rss_MB)
    mem=$(awk -v r="$rss" -v z="$start" -v s="$(field "$ours.row" state_MB)" -v a="$(field "$ours.row" arena_peak_MB)" \
        'BEGIN { printf "%.2f", (r - z) / (s + a) }')
    printf '%-7s | %16s | %15s | %18s | %9s | %8s | %21s | %s\n' "$c" "$ms" "${tms:--}" "$ratio" \
        "$(field "$ours.row" tokens/s)" "$(field "$ours.row" GFLOP/s)" "$rss (start $start)" "$mem"
    rm -f "$ours.row"
done
echo
echo "${soak:-soak: not measured}"
