#!/bin/sh
# bench_mpi.sh - `make bench-mpi`: on one machine, a training step of the
# small and medium models of tests/bench_train.c on 1 rank x 2 threads (whole
# batches, and micro-batches of half the batch) against 2 ranks x 1 thread
# (each rank one micro-batch of half the batch), then 1 rank x 1 thread:
# ms/step (median), the part spent in collectives, the bytes each rank
# sends.  The same micro-batch gives the same weights on 1 and 2 ranks (the
# checksum column).  Usage: sh tests/bench_mpi.sh [small|medium]...
# Environment: BENCH_STEPS (timed steps; default: bench_train's).
# `sh tests/bench_mpi.sh build` builds build-mpi/bench_mpi and stops.
set -e
cd "$(dirname "$0")/.."
configs=${*:-small medium}
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    echo "bench-mpi: skipped: no mpicc or mpirun (sh tests/install-deps.sh installs openmpi-bin and libopenmpi-dev)"
    exit 0
fi
make -s --no-print-directory MPI=1 all build-mpi/libtrain.a
flags="-std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno -O3 -march=native -DAG_MPI -Iinclude -Isrc -Itrain/model -Itrain/dist -Itrain/cli"
# shellcheck disable=SC2086
mpicc $flags -pthread tests/bench_mpi.c build-mpi/libtrain.a build-mpi/libattograd.a -lm -o build-mpi/bench_mpi
[ "$configs" = build ] && exit 0       # tests/bench_multihost.sh runs it on namespace hosts

# root may start mpirun only when it says so; a rank bound to one core
# (mpirun's default for one or two ranks) cannot run two threads
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=${BENCH_STEPS:+--steps $BENCH_STEPS}
run() {  # ranks threads micro-batch config
    # shellcheck disable=SC2086
    mpirun -np "$1" --bind-to none ./build-mpi/bench_mpi --threads "$2" --micro-batch "$3" $steps "$4" | grep '^config'
}
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(mpirun --version | head -n 1)"
for c in $configs; do
    case $c in
    small) half=6 ;;
    medium) half=8 ;;
    *) echo "bench_mpi.sh: '$c' is not a config (small, medium)" >&2; exit 2 ;;
    esac
    run 1 2 0 "$c"
    run 1 2 "$half" "$c"
    run 2 1 "$half" "$c"
    run 1 1 "$half" "$c"
done
