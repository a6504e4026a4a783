#!/usr/bin/env bash
# Session 28 (scratch), call 8: a row program's other negative powers of a value whose rsqrt is named, as powers of
# that rsqrt (1 / (var + eps) as rsqrt * rsqrt: no division between a row's sums and its gradients): the generated
# tests of the twelve kernels whose files changed, and LayerNorm's backward at 16384 x 14336 against 5f8924b's.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 110 python3 -m pytest -q -n 8 -p no:cacheprovider  test/transformers/test_add_rms_norm_gen.py test/transformers/test_fused_add_rms_norm_gen.py test/transformers/test_gemma_rms_norm_gen.py test/transformers/test_gemma_style_rms_norm_gen.py test/transformers/test_group_norm_functional_grp.py test/transformers/test_group_norm_grp.py test/transformers/test_layer_norm_gen.py test/transformers/test_mean_square_layer_norm_gen.py test/transformers/test_modulated_rms_norm_bc.py test/transformers/test_poly_norm_gen.py test/transformers/test_rms_norm_gen.py test/transformers/test_row_scaled_norm_bc.py > $OUT/rsqrt_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/rsqrt_tests.log
timeout 40 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H --reps 20 \
  --kernel layer_norm_gen=layer_norm --sizes 14336 --no-compile --variant $H/var/layer_norm_gen_walk.py > $OUT/ln_rsqrt_ab.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| layer\|copy\|Error" $OUT/ln_rsqrt_ab.log | tail -4
