#!/bin/sh
# install-deps.sh - Debian packages the optional test suites use: PyTorch (the
# parity tests against tests/twin.py), OpenBLAS (the benchmark's reference
# sgemm), Graphviz and rsvg-convert (checks that the DOT graph and the SVG
# pictures render, tests/cli_viz.sh), clang's
# libFuzzer runtime and valgrind for the hostile-input checks, and Open MPI
# (the MPI build, make MPI=1, and tests/cli_mpi.sh); emscripten, Chromium,
# node and npm for the browser playground (make web, tests/web_playground.sh),
# whose test drives Chromium with the npm package in tests/web/ (npm ci);
# pkg-config (the installed library's flags, tests/cli_everyday2.sh), strace
# (a save held inside fsync, tests/cli_everyday.sh) and iproute2 (the
# namespace hosts of tests/cli_multihost.sh).
# Everything else in attograd needs only a C compiler and make.
set -e
pkgs="python3-torch python3-numpy libopenblas0-pthread libopenblas-dev graphviz librsvg2-bin clang libclang-rt-14-dev valgrind openmpi-bin libopenmpi-dev emscripten chromium nodejs pkg-config strace iproute2"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# Debian's nodejs comes without npm (NodeSource's has it)
command -v npm >/dev/null 2>&1 || dpkg -s nodejs 2>/dev/null | grep -q nodesource || missing="$missing npm"
if [ -n "$missing" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi
web=$(dirname "$0")/web
[ -d "$web/node_modules/playwright-core" ] || (cd "$web" && npm ci --no-audit --no-fund)
