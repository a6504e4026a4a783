#!/usr/bin/env bash
# Session 29 (scratch), call 5: DyT's backward with tanh_from_exp's division approximate (fdiv_tanh), with
# 1 - tanh^2 as 4e / (1 + e)^2 from the same exponential (var/dyt_sech2.py), without the small-|u| series
# (var/dyt_noseries.py, a bound), SFU tanh (a bound); upstream beside.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 300 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H --no-compile \
  --kernel dyt_gen=dyt --sizes 8192 14336 --variant fdiv_tanh approx_tanh $H/var/dyt_sech2.py $H/var/dyt_noseries.py \
  > $OUT/dyt_tanh.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| \|copy\|Error" $OUT/dyt_tanh.log
