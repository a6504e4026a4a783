#!/usr/bin/env bash
# Session 33 (scratch), call E: clamp with tensor bounds after 827f21c (torch's gradients at ties, which bf16 bounds hit
# on the GPU in call D) and with hyper-parameter bounds: their generated tests on the GPU.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -n 2 -p no:cacheprovider test/transformers/test_clamp_tensor_bounds.py \
  test/transformers/test_clamp_hyper_bounds.py > $OUT/clamp_tests.log 2>&1
echo "clamp: $?"; grep -E "^FAILED|passed|failed" $OUT/clamp_tests.log | tail -4
