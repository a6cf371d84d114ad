#!/bin/sh
# bench_scale.sh - `make bench-scale`: how time and memory grow with the
# context.  The 6-layer, 6-head, d_model-384 GPT (V 65, AdamW) at
# T = 256, 1024, 2048, 4096 with the same tokens per step (B T = 8192):
# median ms/step and the process's peak RSS, each config in its own process;
# the explicit op-by-op attention beside the fused op at T = 256 and 1024
# (beyond that its [B,H,T,T] tensors do not fit); a model of GPT-2-small
# shape (12 layers, 12 heads, d_model 768, T 1024, B 4); and sampling
# tokens/s with the key/value cache at context 256 and 1024.
# Environment: BENCH_THREADS (default 2), CC.
set -e
cd "$(dirname "$0")/.."
threads=${BENCH_THREADS:-2}
cc=${CC:-cc}
make -s --no-print-directory all build/libtrain.a
$cc -std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno -O3 -march=native -pthread -Iinclude -Isrc -Itrain/model -Itrain/dist -Itrain/cli \
    tests/bench_train.c build/libtrain.a build/libattograd.a -lm -o build/bench_train
echo "machine: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "threads: $threads; each row one process; ms/step is the median of the timed steps after one untimed"
echo

field() { echo "$1" | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
run() {  # run LABEL [bench_train args...]: one row
    label=$1; shift
    line=$(./build/bench_train --threads "$threads" "$@" | grep '^config') || { printf '%-34s failed\n' "$label"; return; }
    printf '%-34s %10s ms/step  %9s peak RSS (MB)  %8s tokens/s\n' "$label" "$(field "$line" ms/step)" \
        "$(field "$line" peak_rss_MB)" "$(field "$line" tokens/s)"
}
echo "6 layers, 6 heads, d_model 384, B T = 8192:"
for T in 256 1024 2048 4096; do
    run "  T $T, B $((8192 / T)), fused attention" "6x6x384x${T}x$((8192 / T))x3"
done
for T in 256 1024; do
    run "  T $T, B $((8192 / T)), explicit ops" --explicit "6x6x384x${T}x$((8192 / T))x3"
done
echo
echo "GPT-2-small shape (12 layers, 12 heads, d_model 768, vocabulary 65):"
run "  T 1024, B 4, fused attention" 12x12x768x1024x4x2
echo

# sampling: an untrained 6-layer d_model-384 model per context, a prompt of
# half the context, 200 new tokens (past the context at 256: one refill)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "sampling, 6 layers, d_model 384, prompt of half the context, 200 tokens:"
for T in 256 1024; do
    ./build/attograd train --text data/tiny.txt --layers 6 --heads 6 --d-model 384 --context $T --batch 1 \
        --steps 1 --eval-every 0 --quiet --save "$tmp/m$T.st" >/dev/null
    prompt=$(tr '\n' ' ' <data/tiny.txt | head -c $((T / 2)))
    t0=$(date +%s.%N)
    ./build/attograd sample --model "$tmp/m$T.st" --prompt "$prompt" --tokens 200 --seed 1 --threads "$threads" \
        >/dev/null 2>&1
    t1=$(date +%s.%N)
    awk -v t0="$t0" -v t1="$t1" -v T="$T" 'BEGIN { printf "  context %4d: %6.1f tokens/s (%.2f s for 200, model load included)\n", T, 200 / (t1 - t0), t1 - t0 }'
done
