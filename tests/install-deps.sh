#!/bin/sh
# install-deps.sh - Debian packages the optional test suites use: PyTorch (the
# parity tests against tests/twin.py), OpenBLAS (the benchmark's reference
# sgemm), Graphviz (checks that DOT output renders), rsvg-convert, and clang's
# libFuzzer runtime and valgrind for the hostile-input checks.
# Everything else in attograd needs only a C compiler and make.
set -e
pkgs="python3-torch python3-numpy libopenblas0-pthread libopenblas-dev graphviz librsvg2-bin clang libclang-rt-14-dev valgrind"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
