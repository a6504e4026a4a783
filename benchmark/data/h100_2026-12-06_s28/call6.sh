#!/usr/bin/env bash
# Session 28 (scratch), call 6: the sweep backward whose walk visits rows of the input only (a per-walker trip
# count; no row mask, the parameter gradients' partial sums unmasked; SASS 1576 instructions offline against
# P_1_8_3's 1768): the generated tests of the kernels that have it (with the new sweep-vs-split test at 1000 x 14336,
# rows the walkers do not divide), LayerNorm's gradients at 16384 rows against fp32 torch, its backward against
# the files before it and P_1_8_3, and the norm rows of the styles that take it.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 120 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_layer_norm_gen.py \
  test/transformers/test_fused_add_rms_norm_gen.py test/transformers/test_add_rms_norm_gen.py \
  test/transformers/test_mean_square_layer_norm_gen.py test/transformers/test_rms_norm_gen.py > $OUT/sweep_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/sweep_tests.log; grep -c "sweep_matches_split_path.*PASSED\|PASSED.*sweep_matches" $OUT/sweep_tests.log
timeout 60 python3 $H/ln_check.py > $OUT/ln_check.log 2>&1; echo "check: $?"; tail -4 $OUT/ln_check.log
timeout 120 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 14336 --no-compile --variant $H/var/layer_norm_gen_before_s28.py \
  $H/var/layer_norm_gen_mask_only.py $H/var/layer_norm_gen_P_1_8_3.py > $OUT/ln_walk_ab.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| layer\|copy\|Error" $OUT/ln_walk_ab.log | tail -8
timeout 150 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 16384 --sizes 14336 --rounds 5 --gpu-time --memory-dy autograd \
  --kernel add_rms_norm_gen=fused_add_rms_norm --kernel mean_square_layer_norm_gen=layer_norm \
  --kernel layer_norm_gen=layer_norm --csv $OUT/norms_sweep_14336.csv > $OUT/norms_sweep_14336.log 2>&1
echo "norms: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy" $OUT/norms_sweep_14336.log | head -12
