#!/bin/sh
# bench.sh - `make bench`: one training step's speed in attograd and in PyTorch
# on the same models, as a table.  Usage: sh tests/bench.sh [toy|small|medium]...
# Environment: BENCH_THREADS (default 2), CC, PYTHON (default /usr/bin/python3),
# BENCH_TORCH_SETTINGS (default passive,omp1: the thread settings PyTorch is
# tried with, see tests/bench_torch.py), BENCH_OPENBLAS_CORETYPE (skip the
# OpenBLAS core probe of tests/bench_blas.sh and use this core type),
# BENCH_ROUNDS (default 1: how many times each config is timed).
#
# PyTorch runs at its best: OpenBLAS with the fastest core type on this CPU,
# and for each config and precision the faster of the thread settings tried;
# the table's PyTorch columns are those, and the lines above it say which.
#
# Each config is timed in attograd and then at once in PyTorch, config by
# config, round after round: a shared or virtual machine's speed drifts over
# minutes, and a ratio of two times taken minutes apart carries the drift.
# With more than one round the table gives each column's median over the
# rounds, and a line per config gives every round's own ratio.
set -e
cd "$(dirname "$0")/.."
threads=${BENCH_THREADS:-2}
configs=${*:-toy small medium}
cc=${CC:-cc}
py=${PYTHON:-/usr/bin/python3}
settings=${BENCH_TORCH_SETTINGS:-passive,omp1}
rounds=${BENCH_ROUNDS:-1}
case $rounds in
'' | *[!0-9]* | 0) echo "bench.sh: BENCH_ROUNDS must be a whole number of rounds, at least 1, not '$rounds'" >&2; exit 2 ;;
esac
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
bf16=$(mktemp)
tlog=$(mktemp)
pool=$(mktemp)
trap 'rm -f "$ours" "$theirs" "$ours.row" "$ours.run" "$bf16" "$tlog" "$pool"' EXIT
# attograd's bf16 mixed precision, where this CPU has a bf16 kernel
has_bf16=0
if ./build/bench_train --threads "$threads" --precision bf16 1x1x8x8x1x1 >/dev/null 2>&1; then
    has_bf16=1
else
    echo "note: no bf16 matrix multiply on this CPU: attograd's bf16 column is skipped"
fi
has_torch=0
if "$py" -c 'import torch' 2>/dev/null; then
    has_torch=1
    echo
    echo "PyTorch $("$py" -c 'import torch; print(torch.__version__)') ($py), at its best:"
    # the OpenBLAS kernels: the fastest core type on this CPU (report on stderr)
    if core=$(CC=$cc sh tests/bench_blas.sh "$threads" 2>&1 >"$theirs"); then :; fi
    echo "$core" | sed 's/^/  /'
    core=$(cat "$theirs")
    : >"$theirs"
else
    echo
    echo "note: PyTorch not importable by $py; its columns are skipped"
fi
# Round r's lines carry "round r" after the config's name is read, as the
# last two fields, so the table's code can pick them out.
r=1
while [ "$r" -le "$rounds" ]; do
    [ "$rounds" -gt 1 ] && echo "round $r of $rounds ..." >&2
    for c in $configs; do
        ./build/bench_train --threads "$threads" "$c" >"$ours.run"
        grep '^config' "$ours.run" | sed "s/\$/ round $r/" >>"$ours"
        # what this process's pool measured: the machine's state when it ran
        sed -n "s/^threads measured (src\/pool.c): wake-up \([0-9.]*\) us, fork \([0-9.]*\) us.*/  $c round $r: fork \2 us, wake-up \1 us/p" \
            "$ours.run" >>"$pool"
        if [ "$has_bf16" = 1 ]; then
            ./build/bench_train --threads "$threads" --precision bf16 "$c" | grep '^config' | sed "s/\$/ round $r/" >>"$bf16"
        fi
        if [ "$has_torch" = 1 ]; then
            "$py" tests/bench_torch.py --threads "$threads" --precision both --settings "$settings" \
                --coretype "${core:-library}" "$c" >"$tlog" || echo "note: tests/bench_torch.py failed" >&2
            # how PyTorch ran: the same every time, so shown once
            if [ "$r" = 1 ] && ! grep -q '^config' "$theirs"; then
                grep -v -e '^config' -e '^tried' "$tlog" | sed 's/^/  /'
            fi
            grep '^config' "$tlog" | sed "s/\$/ round $r/" >>"$theirs"
        fi
    done
    r=$((r + 1))
done
# memory must stay flat across steps: 1000 more toy steps
soak=$(./build/bench_train --threads "$threads" --soak 1000 toy | grep '^soak' || true)
echo
echo "GFLOP/s = (6 * params * B*T + 12 * n_layer * B * T^2 * d) / median step time; peak RSS of attograd's process"
echo "memory = (peak RSS - RSS at the process's start) / (parameters + gradients + optimizer state + arena peak)"
echo "PyTorch best = the faster of PyTorch's float32 and bf16 autocast, each at its best thread setting"
echo "ratios are step times: attograd fp32 or bf16 over PyTorch best, attograd bf16 over attograd fp32"
echo

# value after a key on a "config NAME key value key value ..." line
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"; }
# config $2's line in $1 of the median round by ms/step (of an even count of
# rounds, the faster middle one), or of round $3 when given
pick_row() {
    grep "^config $2 " "$1" | awk -v r="${3:-}" 'r == "" || $NF == r' |
        awk '{ for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1), $0 }' | sort -g |
        awk '{ l[NR] = $0 } END { if (NR) { m = l[int((NR + 1) / 2)]; sub(/^[^ ]* /, "", m); print m } }'
}
# PyTorch's ms/step for config $1 in precision $2 (the median round's, or
# round $3's), or how its run ended
torch_ms() {
    runs=$(awk -v c="$1" -v p="$2" -v r="${3:-}" '$1 == "config" && $2 == c && $3 == "precision" && $4 == p && (r == "" || $NF == r) {
        if ($5 == "ms/step") print "ms", $6; else if ($5 == "crashed") print "end crashed (signal " $7 ")"; else print "end", $5, $6, $7 }' "$theirs")
    n=$(printf '%s\n' "$runs" | grep -c '^ms ' || true)
    if [ "$n" -gt 0 ]; then
        printf '%s\n' "$runs" | sed -n 's/^ms //p' | sort -g | sed -n "$(((n + 1) / 2))p"
    else
        printf '%s\n' "$runs" | sed -n 's/^end //p' | head -n 1
    fi
}
# the faster of PyTorch's two columns
torch_best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && (b + 0 <= 0 || a + 0 <= b + 0)) print a; else if (b + 0 > 0) print b }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

row='%-7s | %8s | %8s | %8s | %8s | %10s | %10s | %9s | %9s | %8s | %21s | %s\n'
printf "$row" config "fp32 ms" "bf16 ms" "PyTorch" "PT bf16" "fp32/PT" "bf16/PT" "bf16/fp32" tokens/s GFLOP/s \
    "peak RSS (MB)" "memory"
printf "$row" "" attograd attograd "fp32 ms" "ms" best best attograd fp32 fp32 fp32 fp32
for c in $configs; do
    pick_row "$ours" "$c" >"$ours.row"
    ms=$(field "$ours.row" ms/step)
    bms16=$(pick_row "$bf16" "$c" | awk '{ for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1) }')
    tms=$(torch_ms "$c" fp32)
    bms=$(torch_ms "$c" bf16)
    best=$(torch_best "$tms" "$bms")
    rss=$(field "$ours.row" peak_rss_MB)
    start=$(field "$ours.row" start_rss_MB)
    mem=$(awk -v r="$rss" -v z="$start" -v s="$(field "$ours.row" state_MB)" -v a="$(field "$ours.row" arena_peak_MB)" \
        'BEGIN { printf "%.2f", (r - z) / (s + a) }')
    printf "$row" "$c" "$ms" "${bms16:--}" "${tms:--}" "${bms:--}" "$(ratio "$ms" "$best")" "$(ratio "$bms16" "$best")" \
        "$(ratio "$bms16" "$ms")" "$(field "$ours.row" tokens/s)" "$(field "$ours.row" GFLOP/s)" "$rss (start $start)" "$mem"
    rm -f "$ours.row"
done
if [ "$rounds" -gt 1 ]; then
    echo
    echo "each round's own ratios (attograd and PyTorch timed one after the other), rounds 1 to $rounds:"
    for c in $configs; do
        f="" f32="" b=""
        r=1
        while [ "$r" -le "$rounds" ]; do
            t32=$(torch_ms "$c" fp32 "$r")
            best_r=$(torch_best "$t32" "$(torch_ms "$c" bf16 "$r")")
            ours_r=$(pick_row "$ours" "$c" "$r" | awk '{ for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1) }')
            f="$f $(ratio "$ours_r" "$best_r")"
            f32="$f32 $(ratio "$ours_r" "$t32")"
            b="$b $(ratio "$(pick_row "$bf16" "$c" "$r" | awk '{ for (i = 1; i < NF; i++) if ($i == "ms/step") print $(i + 1) }')" "$best_r")"
            r=$((r + 1))
        done
        printf "  %-7s fp32/PT best:%s   fp32/PT fp32:%s   bf16/PT best:%s\n" "$c" "$f" "$f32" "$b"
    done
fi
if grep -q '^config .* setting ' "$theirs"; then
    echo
    echo "PyTorch's columns: the faster thread setting per config and precision, its ms/step (the others'):"
    for c in $configs; do
        for p in fp32 bf16; do
            awk -v c="$c" -v p="$p" -v many="$((rounds > 1))" '$1 == "config" && $2 == c && $4 == p && $5 == "ms/step" {
                o = ""; for (i = 1; i < NF; i++) if ($i == "others") o = $(i + 1)
                gsub(":", " ", o); gsub(",", ", ", o)
                printf "  %-7s %s  %-8s %9.3f (%s)%s\n", c, p, $8, $6, o, many ? ", round " $NF : "" }' "$theirs"
        done
    done
fi
if [ -s "$pool" ]; then
    echo
    echo "attograd's threads as each fp32 process measured them at its start (src/pool.c; README, Speed):"
    echo "on the Zen 5 of the README a fork of about 0.1 us where its 2 CPUs hand work over fast, 0.4-0.5 us"
    echo "in its slow state (the toy step 1.5-1.7x slower), several us where another process holds a core:"
    cat "$pool"
fi
echo
echo "${soak:-soak: not measured}"
