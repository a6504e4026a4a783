#!/usr/bin/env bash
# Session 32 (scratch), call B: every generated kernel that now scales its stored gradients with ops/utils.py's
# scale_by_grad_output_kernel (tier-3 losses, their fused linear forms, the two-stage fused losses): generated tests
# on the GPU; then the fused CE's kernel breakdown.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
t0=$SECONDS
H=$(cd .whl && pwd)
cd .gpu-run
tests="$(cat $H/s32/scale_tests.txt) test/transformers/test_fused_linear_cross_entropy_gen.py"
tests="$tests test/transformers/test_fused_linear_gathered_weighted_nll_gen.py test/transformers/test_fused_linear_distill_kl.py test/transformers/test_geglu.py test/transformers/test_geglu_gen.py"
PYTHONPATH=src:. timeout 330 python3 -m pytest -q -n 4 -p no:cacheprovider $tests > $OUT/scale_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; grep -E "passed|failed|Error" $OUT/scale_tests.log | tail -5
PYTHONPATH=src:. timeout $((440-SECONDS+t0)) python3 $H/s32/fl_profile.py > $OUT/fl_profile.log 2>&1
echo "profile: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/fl_profile.log | head -40
