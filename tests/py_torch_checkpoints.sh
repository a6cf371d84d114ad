#!/bin/sh
# py_torch_checkpoints.sh - checkpoints written by PyTorch code (json.dumps
# metadata, bare state_dicts, F16/BF16/F64 weights, tied embeddings,
# torch.save pickles) loaded by attograd: tests/torch_checkpoints.py.
# Needs Debian's python3-torch at /usr/bin/python3; without it the tests are
# reported as skipped.  Run from the repository root; ATTOGRAD and PYTHON
# override the defaults.
AG=${ATTOGRAD:-./build/attograd}
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    echo "PyTorch checkpoint tests skipped: $PY cannot import torch (tests/install-deps.sh installs python3-torch)"
    # JSON metadata, bare state_dicts, half precision and double, tied weights, pickles
    echo "0 passed, 0 failed, 5 skipped"
    exit 0
fi
if [ ! -x "$AG" ]; then
    echo "PyTorch checkpoint tests: $AG not found (run make first)"
    echo "0 passed, 1 failed"
    exit 1
fi
exec "$PY" tests/torch_checkpoints.py --attograd "$AG"
