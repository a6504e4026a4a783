#!/usr/bin/env bash
# Session 41, one call: the checks session 40 left for the GPU (call5: softmax dim=2's rank check, a renamed input's
# messages; the row kernels' accurate forms, refs_s41.py), this session's rows longer than one program holds
# (long_rows_check.py), on an H200 the fused linear cross entropy's chunk sweep, then issue 43's table
# (../h200_2026-12-07_s38/callAB.sh). Carry .gpu-run (built with this folder's gen_refs.sh last) and .whl.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
T=test/transformers
(cd .gpu-run && PYTHONPATH=src:. timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s40_softmax_dim2.py \
  $T/test_s40_masked_softmax.py $T/test_s41_centered_expm1.py $T/test_s41_erfc_rms_norm.py $T/test_s41_log1p_share.py \
  $T/test_s41_vocab_softmax.py $T/test_s41_scaled_log_softmax.py $T/test_s41_kd_masked.py $T/test_s41_xlogy_gate.py \
  $T/test_s41_masked_inf_softmax.py $T/test_s41_logit_adjusted_ce.py $T/test_s41_flattened_ce.py \
  > $OUT/s41_tests.log 2>&1)
echo "tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/s41_tests.log
(cd .gpu-run && PYTHONPATH=src:. timeout 90 python3 ../benchmark/data/h100_2026-12-07_s41/long_rows_check.py \
  > $OUT/long_rows.log 2>&1)
echo "long rows: $? at $((SECONDS-t0)) s"; cat $OUT/long_rows.log
# The fused linear chunk sweep (chunk_sweep.py) only where the card is an H200, whose bandwidth changes the
# weight-gradient sum's share (device time is scarce: the H100's is in ../h100_2026-12-05_s24).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (cd .gpu-run && PYTHONPATH=src:. timeout 90 python3 ../benchmark/data/h100_2026-12-07_s41/chunk_sweep.py > $OUT/chunk_sweep.log 2>&1)
  echo "chunk sweep: $? at $((SECONDS-t0)) s"; cat $OUT/chunk_sweep.log
fi
bash benchmark/data/h200_2026-12-07_s38/callAB.sh
