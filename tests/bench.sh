#!/bin/sh
# bench.sh - `make bench`: one training step's speed in attograd and in PyTorch
# on the same models, as a table.  Usage: sh tests/bench.sh [toy|small|medium]...
# Environment: BENCH_THREADS (default 2), CC, PYTHON (default /usr/bin/python3),
# BENCH_TORCH_SETTINGS (default passive,omp1: the thread settings PyTorch is
# tried with, see tests/bench_torch.py), BENCH_OPENBLAS_CORETYPE (skip the
# OpenBLAS core probe of tests/bench_blas.sh and use this core type).
#
# PyTorch runs at its best: OpenBLAS with the fastest core type on this CPU,
# and for each config and precision the faster of the thread settings tried;
# the table's PyTorch columns are those, and the lines above it say which.
set -e
cd "$(dirname "$0")/.."
threads=${BENCH_THREADS:-2}
configs=${*:-toy small medium}
cc=${CC:-cc}
py=${PYTHON:-/usr/bin/python3}
settings=${BENCH_TORCH_SETTINGS:-passive,omp1}
for c in $configs; do
    case $c in
    toy | small | medium) ;;
    *) echo "bench.sh: '$c' is not a config (toy, small, medium)" >&2; exit 2 ;;
    esac
done

make -s --no-print-directory all build/libtrain.a
$cc -std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno -O3 -march=native -pthread -Iinclude -Isrc -Itrain/model -Itrain/dist -Itrain/cli \
    tests/bench_train.c build/libtrain.a build/libattograd.a -lm -pthread -o build/bench_train

flags=$(sed -n 's/^flags[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
has() { case " $flags " in *" $1 "*) echo "$1 yes" ;; *) echo "$1 no" ;; esac; }
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p')
family=$(sed -n 's/^cpu family[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
model=$(sed -n 's/^model[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
hv=$(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor:[[:space:]]*//p')
echo "machine: ${cpu:-unknown CPU} (family ${family:-?} model ${model:-?}), $(nproc) cores${hv:+, $hv guest}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU flags: $(has avx2), $(has avx512f), $(has avx512_bf16), $(has amx_tile), $(has amx_bf16)"
echo "compiler: $($cc --version | head -n 1), -O3 -march=native"
echo "threads: $threads (attograd --threads $threads; PyTorch's thread settings below)"

# Each config in its own process, so peak RSS is that config's alone.
ours=$(mktemp)
theirs=$(mktemp)
trap 'rm -f "$ours" "$theirs" "$ours.row" "$bf16"' EXIT
bf16=$(mktemp)
for c in $configs; do
    ./build/bench_train --threads "$threads" "$c" | grep '^config' >>"$ours"
done
# attograd's bf16 mixed precision, where this CPU has a bf16 kernel
if ./build/bench_train --threads "$threads" --precision bf16 1x1x8x8x1x1 >/dev/null 2>&1; then
    for c in $configs; do
        ./build/bench_train --threads "$threads" --precision bf16 "$c" | grep '^config' >>"$bf16"
    done
else
    echo "note: no bf16 matrix multiply on this CPU: attograd's bf16 column is skipped"
fi
# memory must stay flat across steps: 1000 more toy steps
soak=$(./build/bench_train --threads "$threads" --soak 1000 toy | grep '^soak' || true)
if "$py" -c 'import torch' 2>/dev/null; then
    echo
    echo "PyTorch $("$py" -c 'import torch; print(torch.__version__)') ($py), at its best:"
    # the OpenBLAS kernels: the fastest core type on this CPU (report on stderr)
    if core=$(CC=$cc sh tests/bench_blas.sh "$threads" 2>&1 >"$theirs"); then :; fi
    echo "$core" | sed 's/^/  /'
    core=$(cat "$theirs")
    "$py" tests/bench_torch.py --threads "$threads" --precision both --settings "$settings" \
        --coretype "${core:-library}" $configs >"$theirs" || echo "note: tests/bench_torch.py failed" >&2
    grep -v -e '^config' -e '^tried' "$theirs" | sed 's/^/  /'
else
    echo
    echo "note: PyTorch not importable by $py; its columns are skipped"
fi
echo
echo "GFLOP/s = (6 * params * B*T + 12 * n_layer * B * T^2 * d) / median step time; peak RSS of attograd's process"
echo "memory = (peak RSS - RSS at the process's start) / (parameters + gradients + optimizer state + arena peak)"
echo "PyTorch best = the faster of PyTorch's float32 and bf16 autocast, each at its best thread setting"
echo "ratios are step times: attograd fp32 or bf16 over PyTorch best, attograd bf16 over attograd fp32"
echo

# value after a key on a "config NAME key value key value ..." line
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"; }
# PyTorch's ms/step for config $1 in precision $2, or how its run ended
torch_ms() {
    awk -v c="$1" -v p="$2" '$1 == "config" && $2 == c && $3 == "precision" && $4 == p {
        if ($5 == "ms/step") print $6; else if ($5 == "crashed") print "crashed (signal " $7 ")"; else print $5 " " $6 " " $7 }' "$theirs"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

row='%-7s | %8s | %8s | %8s | %8s | %10s | %10s | %9s | %9s | %8s | %21s | %s\n'
printf "$row" config "fp32 ms" "bf16 ms" "PyTorch" "PT bf16" "fp32/PT" "bf16/PT" "bf16/fp32" tokens/s GFLOP/s \
    "peak RSS (MB)" "memory"
printf "$row" "" attograd attograd "fp32 ms" "ms" best best attograd fp32 fp32 fp32 fp32
for c in $configs; do
    grep "^config $c " "$ours" >"$ours.row" || true
    ms=$(field "$ours.row" ms/step)
    bms16=$(grep "^config $c " "$bf16" | awk '{ for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1) }')
    tms=$(torch_ms "$c" fp32)
    bms=$(torch_ms "$c" bf16)
    best=$(awk -v a="$tms" -v b="$bms" 'BEGIN { if (a + 0 > 0 && (b + 0 <= 0 || a + 0 <= b + 0)) print a; else if (b + 0 > 0) print b }')
    rss=$(field "$ours.row" peak_rss_MB)
    start=$(field "$ours.row" start_rss_MB)
    mem=$(awk -v r="$rss" -v z="$start" -v s="$(field "$ours.row" state_MB)" -v a="$(field "$ours.row" arena_peak_MB)" \
        'BEGIN { printf "%.2f", (r - z) / (s + a) }')
    printf "$row" "$c" "$ms" "${bms16:--}" "${tms:--}" "${bms:--}" "$(ratio "$ms" "$best")" "$(ratio "$bms16" "$best")" \
        "$(ratio "$bms16" "$ms")" "$(field "$ours.row" tokens/s)" "$(field "$ours.row" GFLOP/s)" "$rss (start $start)" "$mem"
    rm -f "$ours.row"
done
if grep -q '^config .* setting ' "$theirs"; then
    echo
    echo "PyTorch's columns: the faster thread setting per config and precision (the others' ms/step):"
    for c in $configs; do
        for p in fp32 bf16; do
            awk -v c="$c" -v p="$p" '$1 == "config" && $2 == c && $4 == p && $5 == "ms/step" {
                o = ""; for (i = 1; i < NF; i++) if ($i == "others") o = $(i + 1)
                gsub(":", " ", o); gsub(",", ", ", o)
                printf "  %-7s %s  %-8s (%s)\n", c, p, $8, o }' "$theirs"
        done
    done
fi
echo
echo "${soak:-soak: not measured}"
