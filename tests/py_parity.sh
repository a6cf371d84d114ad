#!/bin/sh
# py_parity.sh - attograd against its PyTorch twin (tests/parity.py): losses,
# one SGD step, five AdamW steps and checkpoints in both directions.  Needs
# Debian's python3-torch; without it the four groups (forward, SGD step, AdamW
# steps, twin checkpoint loaded by attograd) are reported as skipped.
exec sh tests/torch_suite.sh "parity tests" 4 tests/parity.py
