#!/usr/bin/env bash
# Session 28 (scratch), call 1: 959a3db's split backward (the four sweep kernels' and rms_norm_gen's tests, LayerNorm
# generated vs the hand-written P_1_8_3 at 8192 / 14336), and the fused linear losses against their chunk of rows.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 100 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_layer_norm_gen.py \
  test/transformers/test_fused_add_rms_norm_gen.py test/transformers/test_add_rms_norm_gen.py \
  test/transformers/test_mean_square_layer_norm_gen.py test/transformers/test_rms_norm_gen.py > $OUT/sweep_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/sweep_tests.log
timeout 100 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 8192 14336 --no-compile --variant $H/var/layer_norm_gen_P_1_8_3.py > $OUT/ln_generated_sweep.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| layer\|copy\|Error" $OUT/ln_generated_sweep.log | tail -8
timeout 330 python3 $H/fl_chunks.py /tmp/up > $OUT/fl_chunks.log 2>&1
echo "chunks: $? at $((SECONDS-t0)) s"; grep -v "^Backend" $OUT/fl_chunks.log | tail -24
