#!/usr/bin/env bash
# Session 27 (scratch): the pipelined co-scheduled LayerNorm backward: its gradients on the GPU against fp32 torch,
# and more stage / warp counts.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 90 python3 $H/ln_check.py $H/var/layer_norm_gen_P_1_8_3.py > $OUT/ln_check.log 2>&1; echo "check: $?"; cat $OUT/ln_check.log | tail -8
for v in P_1_8_4 P_2_8_3 P_1_4_3; do
  timeout 50 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
    --kernel layer_norm_gen=layer_norm --sizes 14336 --no-compile --variant $H/var/layer_norm_gen_$v.py > $OUT/ln_$v.log 2>&1
  echo "$v: $? at $((SECONDS-t0)) s"; grep "^| layer\|Error" $OUT/ln_$v.log | grep -v upstream | tail -2
done
