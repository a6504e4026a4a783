#!/usr/bin/env bash
# Session 31 (scratch), call 9: the generated tests, on the GPU, of the kernels whose files changed after ea0437b
# (docstrings' formulas named as the reference does, subscripts written as Python does, the two-stage comment):
# the two-stage losses, tier 3 and fused (what the device time left allows).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
export PYTHONPATH=src:.
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do
  tests="$tests test/transformers/test_$n.py test/transformers/test_fused_linear_$n.py"
done
timeout 140 python3 -m pytest -q -n 2 -p no:cacheprovider $tests > $OUT/changed_tests.log 2>&1
echo "tests: $?"; tail -1 $OUT/changed_tests.log
