#!/usr/bin/env bash
# Session 44, call 2, under what is left of the device budget ($1 seconds): on an H200 issue 43's fused linear rows
# and 14336-wide norm rows (the first half of ../h200_2026-12-07_s38/callAB.sh); on another card the losses' generated
# tests (3 workers), then the fused linear forms' (2 workers). Run on .gpu-run rebuilt at the commit under test.
# Carry .gpu-run and .whl.
set -u
left=${1:-580}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
t0=$SECONDS
remaining() { echo $((left - 15 - SECONDS + t0)); }
cd .gpu-run
export PYTHONPATH=src:.
if echo "$card" | grep -q H200; then
  pip install -q --no-deps --target /tmp/up ../.whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
  H=$(cd ../.whl && pwd)
  python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
  timeout $(remaining) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
    --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
    --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
  echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
  timeout $(remaining) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 16384 --sizes 14336 --rounds 5 --gpu-time --memory-dy autograd \
    --kernel gemma_style_rms_norm_gen=gemma_rms_norm --kernel weightless_rms_norm_gen=weightless_rms_norm \
    --kernel add_rms_norm_gen=fused_add_rms_norm --kernel mean_square_layer_norm_gen=layer_norm \
    --kernel normalize_rows_gen=- --csv $OUT/norms_14336.csv > $OUT/norms_14336.log 2>&1
  echo "norms 14336: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy" $OUT/norms_14336.log | head -40
  exit
fi
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 3 $(cat tier3_tests.txt) > $OUT/tier3_tests.log 2>&1
echo "tier 3 tests: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/tier3_tests.log | tail -6
timeout $(remaining) python3 -m pytest -q -p no:cacheprovider -n 2 test/transformers/test_fused_linear_*.py \
  > $OUT/fl_tests.log 2>&1
echo "fused tests -n 2: $? at $((SECONDS-t0)) s"; tail -n 1 $OUT/fl_tests.log
grep -E "^FAILED" $OUT/fl_tests.log | grep -vc OutOfMemory
