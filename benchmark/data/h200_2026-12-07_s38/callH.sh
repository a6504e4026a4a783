#!/usr/bin/env bash
# Session 38, call H (the last 300 s of device time): the generated tests of this session's two losses with a second
# output (refs_outputs.py), plain and fused: a one-kernel loss refusing a gradient reaching z_loss, a two-stage DPO
# differentiating its margin.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 100 python3 -m pytest -q -p no:cacheprovider -n 2 $T/test_s38_ce_and_z.py \
  $T/test_s38_dpo_margin.py > $OUT/loss_tests.log 2>&1
echo "loss tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/loss_tests.log
PYTHONPATH=src:. timeout 100 python3 -m pytest -q -p no:cacheprovider -n 1 $T/test_fused_linear_s38_ce_and_z.py \
  $T/test_fused_linear_s38_dpo_margin.py > $OUT/fused_tests.log 2>&1
echo "fused tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/fused_tests.log
