#!/usr/bin/env bash
# Session 40, the fourth check (bc5c851): a row named by position (softmax dim=2: 3-d inputs only) and an input
# renamed inside its ops file (mask -> mask_in), their generated tests on the GPU. Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
PYTHONPATH=src:. timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 test/transformers/test_s40_softmax_dim2.py \
  test/transformers/test_s40_masked_softmax.py > $OUT/call5_tests.log 2>&1
echo "tests: $?"; tail -3 $OUT/call5_tests.log
