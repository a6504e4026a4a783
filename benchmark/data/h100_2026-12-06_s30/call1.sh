#!/usr/bin/env bash
# Session 30 (scratch), call 1: fused linear CE, d(weight) on a second stream beside d(hidden); cuBLASLt.
# On an H200 also session 29's call 11 (per-chunk matmul rates and the chunk sweep on the issue's card).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 300 python3 $H/s30/fl_streams.py /tmp/up > $OUT/fl_streams.log 2>&1; echo "streams: $? at $((SECONDS-t0)) s"
grep -v Warn $OUT/fl_streams.log
case "$gpu" in *H200*) ;; *) exit 0 ;; esac
timeout 120 python3 $H/fl_ops.py > $OUT/fl_ops_h200.log 2>&1; echo "ops: $? at $((SECONDS-t0)) s"; cat $OUT/fl_ops_h200.log
WHICH=ce CE_CHUNKS="0 768 1024" timeout 150 python3 $H/fl_chunks.py /tmp/up > $OUT/fl_chunks_ce_h200.log 2>&1
echo "chunks: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/fl_chunks_ce_h200.log
