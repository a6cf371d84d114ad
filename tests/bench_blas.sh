#!/bin/sh
# bench_blas.sh - pick the OpenBLAS kernels the speed references run with.
# Usage: sh tests/bench_blas.sh [threads] (default 2).
#
# OpenBLAS chooses its kernels ("core type") when it loads, from cpuid or from
# OPENBLAS_CORETYPE.  A release older than the CPU may not recognise it and
# fall back to slow generic kernels, and an OPENBLAS_CORETYPE left in the
# environment may name older kernels than the CPU can run.  So this times one
# sgemm (1024^3, row-major, `threads` threads) under the library's own choice
# and under each core type the CPU's flags allow, in a process each
# (tests/bench_blas.c), and picks the fastest; the library's own choice is
# kept when it is within 3% of the fastest (that is within the noise).
#
# The report goes to stderr; stdout gets one word, the value to give
# OPENBLAS_CORETYPE in the reference's process, or nothing (exit 3) when
# there is no OpenBLAS.  BENCH_OPENBLAS_CORETYPE=NAME skips the probe and
# uses NAME.  CC (default cc) builds the probe into build/bench_blas.
set -e
cd "$(dirname "$0")/.."
threads=${1:-2}
cc=${CC:-cc}
probe=build/bench_blas

if [ -n "$BENCH_OPENBLAS_CORETYPE" ]; then
    echo "OpenBLAS core type: $BENCH_OPENBLAS_CORETYPE, given by BENCH_OPENBLAS_CORETYPE (not probed)" >&2
    echo "$BENCH_OPENBLAS_CORETYPE"
    exit 0
fi

mkdir -p build
if ! $cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 tests/bench_blas.c -o "$probe" -ldl 2>/dev/null; then
    echo "OpenBLAS core type: not probed ($cc could not build tests/bench_blas.c)" >&2
    exit 3
fi

# one probe: prints "NAME GFLOP/s", or "failed" (crash, no library)
run_probe() {
    out=$(OPENBLAS_NUM_THREADS=$threads "$probe" "$threads" 1024 2>/dev/null) || { echo failed; return 0; }
    echo "$out" | awk '$1 == "core" { print $2, $4 }'
}

own=$(unset OPENBLAS_CORETYPE; run_probe)
if [ "$own" = failed ]; then
    echo "OpenBLAS core type: no OpenBLAS (${BENCH_OPENBLAS:-libopenblas.so.0} not found; sh tests/install-deps.sh installs it)" >&2
    exit 3
fi
own_core=${own% *}
own_rate=${own#* }

# Core types OpenBLAS 0.3.x names, newest first, each only if the CPU has
# the instructions its kernels use (a forced core type is not checked by
# OpenBLAS and would die of SIGILL).
flags=$(sed -n 's/^flags[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo 2>/dev/null | head -n 1)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
candidates=""
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
    has avx512_bf16 && candidates="$candidates Cooperlake"
    candidates="$candidates SkylakeX"
fi
if has avx2 && has fma; then candidates="$candidates Haswell Zen"; fi
if has avx; then candidates="$candidates Sandybridge"; fi

echo "OpenBLAS core probe: sgemm 1024^3, $threads threads, best GFLOP/s of 0.25 s of runs" >&2
printf '  %-34s %-12s %7s\n' "(unset: the library's own choice)" "$own_core" "$own_rate" >&2
best_core=$own_core
best_rate=$own_rate
for c in $candidates; do
    [ "$c" = "$own_core" ] && continue
    r=$(OPENBLAS_CORETYPE=$c run_probe)
    if [ "$r" = failed ]; then
        printf '  %-34s %-12s %7s\n' "OPENBLAS_CORETYPE=$c" "-" "failed" >&2
        continue
    fi
    printf '  %-34s %-12s %7s\n' "OPENBLAS_CORETYPE=$c" "${r% *}" "${r#* }" >&2
    if awk -v a="${r#* }" -v b="$best_rate" 'BEGIN { exit !(a > b) }'; then
        best_core=${r% *}
        best_rate=${r#* }
    fi
done
if [ "$best_core" != "$own_core" ] &&
    awk -v a="$own_rate" -v b="$best_rate" 'BEGIN { exit !(a >= 0.97 * b) }'; then
    why="the library's own choice, within 3% of the fastest ($best_core, $best_rate GFLOP/s)"
    best_core=$own_core
    best_rate=$own_rate
elif [ "$best_core" = "$own_core" ]; then
    why="the library's own choice, and the fastest"
else
    why="the fastest; the library's own choice, $own_core, reached $own_rate GFLOP/s"
fi
env_note=""
[ -n "$OPENBLAS_CORETYPE" ] && env_note=" (replaces OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE from the environment)"
echo "OpenBLAS core type: $best_core, $best_rate GFLOP/s: $why$env_note" >&2
echo "$best_core"
