#!/usr/bin/env bash
# Session 36 (scratch), call 4: the fused linear test files call 2 did not reach before its time limit (1008 of 1243
# run, none failed), one process.
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 170 python3 -m pytest -q -p no:cacheprovider $T/test_fused_linear_s36_wce.py $T/test_fused_linear_s36_zloss.py $T/test_fused_linear_simpo_margin.py $T/test_fused_linear_tempered_dpo.py > $OUT/fused_rest.log 2>&1
echo "rest: $?"; grep -E "^FAILED|passed|failed" $OUT/fused_rest.log | tail -20
