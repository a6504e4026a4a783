#!/usr/bin/env bash
# Session 30 (scratch), call 5: the two-stage fused losses' generated tests with the floor from the eager reference in
# the kernel's dtype (bf16 included) and the first case at the kernel's own chunk.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do tests="$tests test/transformers/test_fused_linear_$n.py"; done
timeout 400 python3 -m pytest -q -n 2 -p no:cacheprovider -rA $tests > $OUT/staged_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; grep -c PASSED $OUT/staged_tests.log; grep "FAILED\|passed\|failed" $OUT/staged_tests.log | tail -5
