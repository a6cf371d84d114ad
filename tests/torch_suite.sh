#!/bin/sh
# torch_suite.sh - runs a Python suite that needs PyTorch (Debian's
# python3-torch), or reports its tests as skipped when no Python can import
# torch.  Used by the tests/py_*.sh wrappers:
#
#     sh tests/torch_suite.sh LABEL N_SKIPPED SCRIPT.py
#
# Run from the repository root; ATTOGRAD and PYTHON override the defaults.
label=$1; n_skipped=$2; script=$3
AG=${ATTOGRAD:-./build/attograd}
PY=
for p in ${PYTHON:-/usr/bin/python3 python3}; do
    if "$p" -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    echo "$label skipped: python3-torch is not installed (tests/install-deps.sh installs it)"
    echo "0 passed, 0 failed, $n_skipped skipped"
    exit 0
fi
if [ ! -x "$AG" ]; then
    echo "$label: $AG not found (run make first)"
    echo "0 passed, 1 failed"
    exit 1
fi
exec "$PY" "$script" --attograd "$AG"
