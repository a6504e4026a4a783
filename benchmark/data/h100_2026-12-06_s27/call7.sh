#!/usr/bin/env bash
# Session 27 (scratch): the tier-2 sweep backward as generated: tests of every kernel that has it on the GPU, its
# gradients at 16384 rows against fp32 torch, its time and peak against upstream and torch.compile.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 120 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_layer_norm_gen.py \
  test/transformers/test_rms_norm_gen.py test/transformers/test_gemma_rms_norm_gen.py \
  test/transformers/test_fused_add_rms_norm_gen.py test/transformers/test_add_rms_norm_gen.py \
  test/transformers/test_gemma_style_rms_norm_gen.py test/transformers/test_mean_square_layer_norm_gen.py > $OUT/sweep_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/sweep_tests.log
timeout 60 python3 $H/ln_check.py > $OUT/ln_check.log 2>&1; echo "check: $?"; tail -3 $OUT/ln_check.log
timeout 150 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 16384 --sizes 4096 14336 --rounds 3 --gpu-time \
  --memory-dy autograd --kernel layer_norm_gen=layer_norm --csv $OUT/ln_sweep.csv > $OUT/ln_sweep.log 2>&1
echo "table: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/ln_sweep.log | head -12
