#!/usr/bin/env bash
# Session 29 (scratch), call 8: DyT's backward on 1 x 2048 tiles (half the partial sums a thread: fewer registers,
# more programs an SM) at 4 and 8 warps and 2, 4, 8 programs an SM, against the template's 2 x 2048 at 2.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
set_args=""
for v in dyt_tile2048 dyt_tile2048w8; do for p in 2 4 8; do set_args="$set_args --setting variant=$H/var/$v.py,programs=$p"; done; done
timeout 200 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H --no-compile \
  --kernel dyt_gen=dyt --sizes 4096 8192 14336 --reps 50 $set_args > $OUT/dyt_tiles.log 2>&1
echo "dyt: $? at $((SECONDS-t0)) s"; grep "^| \|copy\|Error" $OUT/dyt_tiles.log
