#!/usr/bin/env bash
# Session 28 (scratch), call 5: the sweep backward with its parameters loaded under the tile's mask (one predicate for
# every load of a block; SASS 1848 -> 1768 instructions offline): the tests of the kernels that have it on the GPU,
# the LayerNorm backward against the file before it, the hand-written P_1_8_3 and P's math in the generated frame
# (G2: 1-D, G4: G2 with one row stride), and the norm rows of the two styles that take the sweep at 14336 columns.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 110 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_layer_norm_gen.py \
  test/transformers/test_fused_add_rms_norm_gen.py test/transformers/test_add_rms_norm_gen.py \
  test/transformers/test_mean_square_layer_norm_gen.py test/transformers/test_rms_norm_gen.py > $OUT/sweep_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/sweep_tests.log
timeout 120 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 14336 --no-compile --variant $H/var/layer_norm_gen_before_s28.py \
  $H/var/layer_norm_gen_P_1_8_3.py $H/var/layer_norm_gen_G2.py $H/var/layer_norm_gen_G4.py > $OUT/ln_mask_ab.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| layer\|copy\|Error" $OUT/ln_mask_ab.log | tail -8
timeout 150 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 16384 --sizes 14336 --rounds 5 --gpu-time --memory-dy autograd \
  --kernel add_rms_norm_gen=fused_add_rms_norm --kernel mean_square_layer_norm_gen=layer_norm \
  --kernel layer_norm_gen=layer_norm --csv $OUT/norms_sweep_14336.csv > $OUT/norms_sweep_14336.log 2>&1
echo "norms: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy" $OUT/norms_sweep_14336.log | head -12
