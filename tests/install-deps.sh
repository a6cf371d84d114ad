#!/bin/sh
# install-deps.sh - Debian packages the optional test suites use: PyTorch (the
# parity tests against tests/twin.py), OpenBLAS (the benchmark's reference
# sgemm), Graphviz (checks that DOT output renders), rsvg-convert, clang's
# libFuzzer runtime and valgrind for the hostile-input checks, and Open MPI
# (the MPI build, make MPI=1, and tests/cli_mpi.sh).
# Everything else in attograd needs only a C compiler and make.
set -e
pkgs="python3-torch python3-numpy libopenblas0-pthread libopenblas-dev graphviz librsvg2-bin clang libclang-rt-14-dev valgrind openmpi-bin libopenmpi-dev"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
