#!/usr/bin/env bash
# Session 39, one call (device time scarce): session 38's loss tests (a9a3eb0's Function change: a second output
# refused by one-kernel losses, differentiated by two-stage ones), then the generated tests of this session's
# references (refs_s39.py), each step under the time left. Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s38_ce_and_z.py \
  $T/test_s38_dpo_margin.py $T/test_cross_entropy_gen.py $T/test_dpo_sigmoid.py $T/test_grpo_kl.py > $OUT/loss_tests.log 2>&1
echo "loss tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/loss_tests.log
PYTHONPATH=src:. timeout 130 python3 -m pytest -q -p no:cacheprovider -n 2 $T/test_fused_linear_s38_ce_and_z.py \
  $T/test_fused_linear_s38_dpo_margin.py $T/test_fused_linear_dpo_sigmoid.py > $OUT/fused_tests.log 2>&1
echo "fused tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/fused_tests.log
PYTHONPATH=src:. timeout $((420-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s39_*.py \
  > $OUT/s39_tests.log 2>&1
echo "s39 tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/s39_tests.log
