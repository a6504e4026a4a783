#!/usr/bin/env bash
# Session 29 (scratch), call 4: DyT (the one generated kernel behind upstream in call 2) under other launch settings:
# forward and backward GPU us apart, upstream beside.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 400 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H --no-compile \
  --kernel dyt_gen=dyt --sizes 4096 8192 14336 --programs 1 4 8 --warps 4 16 --variant libdevice_tanh approx_tanh \
  --tiles 2048x2048x4 8192x2048x16 8192x4096x16 16384x4096x16 > $OUT/dyt_sweep.log 2>&1
echo "sweep: $? at $((SECONDS-t0)) s"; grep "^| dyt\|copy\|Error" $OUT/dyt_sweep.log
