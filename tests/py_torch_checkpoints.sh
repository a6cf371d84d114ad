#!/bin/sh
# py_torch_checkpoints.sh - checkpoints written by PyTorch code (json.dumps
# metadata, bare state_dicts, F16/BF16/F64 weights, tied embeddings,
# torch.save pickles) loaded by attograd: tests/torch_checkpoints.py.  Needs
# Debian's python3-torch; without it the five groups are reported as skipped.
exec sh tests/torch_suite.sh "PyTorch checkpoint tests" 5 tests/torch_checkpoints.py
