#!/usr/bin/env bash
# Session 34 (scratch), call M: the tier-1/2 test template after the reference's backward skips outputs it computes
# without a gradient: the generated tests of every kernel with more than one output (fused add + RMSNorm, HF RoPE
# and its module, rope_seq_first, cos[:, None, :, :] RoPE, gate_and_swap) and of relu_and_mask (a mask output).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
export PYTHONPATH=src:.
files=$(grep -l "_backward_where_differentiable" test/transformers/*.py)
timeout 300 python3 -m pytest -q -n 3 -p no:cacheprovider $files > $OUT/multi_output.log 2>&1
echo "multi-output: $?"; grep -E "^FAILED|passed|failed" $OUT/multi_output.log | tail -8
