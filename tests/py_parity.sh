#!/bin/sh
# py_parity.sh - attograd against its PyTorch twin (tests/parity.py): losses,
# one SGD step, five AdamW steps and checkpoints in both directions.  Needs
# Debian's python3-torch; without it the tests are reported as skipped.
# Run from the repository root; ATTOGRAD and PYTHON override the defaults.
AG=${ATTOGRAD:-./build/attograd}
PY=
for p in ${PYTHON:-/usr/bin/python3 python3}; do
    if "$p" -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    echo "parity tests skipped: python3-torch is not installed (tests/install-deps.sh installs it)"
    # forward, SGD step, AdamW steps, twin checkpoint loaded by attograd
    echo "0 passed, 0 failed, 4 skipped"
    exit 0
fi
if [ ! -x "$AG" ]; then
    echo "parity tests: $AG not found (run make first)"
    echo "0 passed, 1 failed"
    exit 1
fi
exec "$PY" tests/parity.py --attograd "$AG"
