#!/usr/bin/env bash
# Session 38, call G (call D's tests alone, in the 300 s the session had left): the generated tests of
# losses whose Function changed (a second output no longer marked non-differentiable: refused by one-kernel losses, differentiated by two-stage ones): the two sample losses with a
# second output, built-in cross entropy, two staged losses and their fused forms.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 120 python3 -m pytest -q -p no:cacheprovider -n 2 $T/test_s38_ce_and_z.py \
  $T/test_s38_dpo_margin.py $T/test_cross_entropy_gen.py $T/test_dpo_sigmoid.py $T/test_grpo_kl.py > $OUT/loss_tests.log 2>&1
echo "loss tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/loss_tests.log
PYTHONPATH=src:. timeout 110 python3 -m pytest -q -p no:cacheprovider -n 1 $T/test_fused_linear_s38_ce_and_z.py \
  $T/test_fused_linear_s38_dpo_margin.py $T/test_fused_linear_dpo_sigmoid.py > $OUT/fused_tests.log 2>&1
echo "fused tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/fused_tests.log
