#!/usr/bin/env bash
# Session 30 (scratch), call 4: the two-stage losses' generated tests (new chunk rule, the first case at the kernel's
# own chunk), then compare_post_training.py's rows (full mode, host included) at B 8 x T 1024 for the CSV.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do tests="$tests test/transformers/test_fused_linear_$n.py"; done
timeout 300 python3 -m pytest -q -n 2 -p no:cacheprovider $tests > $OUT/staged_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/staged_tests.log
timeout 260 python3 benchmark/scripts/compare_post_training.py --upstream /tmp/up --helper-dir $H \
  --kernel kto_sigmoid=kto --kernel dpo_sigmoid=dpo --kernel orpo_odds_ratio=orpo --kernel simpo_margin=simpo \
  --kernel grpo_kl=- --csv $OUT/post_training.csv > $OUT/post_training.log 2>&1
echo "post: $? at $((SECONDS-t0)) s"; grep "^|" $OUT/post_training.log
