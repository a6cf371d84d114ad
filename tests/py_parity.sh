#!/bin/sh
# py_parity.sh - attograd against its PyTorch twin (tests/parity.py): losses,
# one SGD step, five AdamW steps, checkpoints in both directions, and the
# eval command twin.py suggests.  Needs
# Debian's python3-torch; without it the five groups (forward, SGD step, AdamW
# steps, twin checkpoint loaded by attograd, twin.py run as a script) are
# reported as skipped.
exec sh tests/torch_suite.sh "parity tests" 5 tests/parity.py
