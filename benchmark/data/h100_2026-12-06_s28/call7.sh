#!/usr/bin/env bash
# Session 28 (scratch), call 7: the sweep with the statements that read per-row values alone computed as the row's
# loads are issued (W1, the template's), against 5f8924b's (walk), its gradient without the division by the variance
# (W3: -sum / n * rstd^2), both (W13) and P_1_8_3; the tests of the kernels that have the sweep.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 120 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_layer_norm_gen.py \
  test/transformers/test_fused_add_rms_norm_gen.py test/transformers/test_add_rms_norm_gen.py \
  test/transformers/test_mean_square_layer_norm_gen.py test/transformers/test_rms_norm_gen.py > $OUT/sweep_tests_rows.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/sweep_tests_rows.log
timeout 150 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 14336 --no-compile --variant $H/var/layer_norm_gen_walk.py \
  $H/var/layer_norm_gen_W3.py $H/var/layer_norm_gen_W13.py $H/var/layer_norm_gen_P_1_8_3.py > $OUT/ln_rows_ab.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| layer\|copy\|Error" $OUT/ln_rows_ab.log | tail -8
