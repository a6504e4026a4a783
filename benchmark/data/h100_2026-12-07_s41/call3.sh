#!/usr/bin/env bash
# Session 41, the third call: call2 found sinc's gradient cancelling in fp32 near 0 (235d36e takes a Taylor series
# there); the regenerated kernel's tests at model size. Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
PYTHONPATH=src:. timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 test/transformers/test_s41_new_ops.py \
  > $OUT/s41_new_ops_tests.log 2>&1
echo "tests: $?"; tail -3 $OUT/s41_new_ops_tests.log
