#!/usr/bin/env bash
# Session 29 (scratch), call 7: on an H200 only, the fused linear CE's per-chunk matmul rates and the whole step
# against its chunk rows (issue 43 item 1's bound on the issue's card); on any card, DyT's backward at 3 programs an
# SM (the template's 2 beside).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 100 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H --no-compile \
  --kernel dyt_gen=dyt --sizes 4096 8192 14336 --reps 50 --programs 2 3 > $OUT/dyt_programs.log 2>&1
echo "dyt: $? at $((SECONDS-t0)) s"; grep "^| \|copy\|Error" $OUT/dyt_programs.log
case "$gpu" in *H200*)
  timeout 150 python3 $H/fl_ops.py > $OUT/fl_ops.log 2>&1; echo "ops: $? at $((SECONDS-t0)) s"; cat $OUT/fl_ops.log
  WHICH=ce CE_CHUNKS="0 768 1024 2048" timeout 280 python3 $H/fl_chunks.py /tmp/up > $OUT/fl_chunks_ce.log 2>&1
  echo "chunks: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/fl_chunks_ce.log ;;
esac
