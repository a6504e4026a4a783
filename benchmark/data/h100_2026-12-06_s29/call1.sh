#!/usr/bin/env bash
# Session 29 (scratch), call 1: the fused linear CE's per-chunk matmul rates and the whole step against its chunk rows.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 200 python3 $H/fl_ops.py > $OUT/fl_ops.log 2>&1; echo "ops: $? at $((SECONDS-t0)) s"; cat $OUT/fl_ops.log
WHICH=ce CE_CHUNKS="0 704 768 1024" timeout 300 python3 $H/fl_chunks.py /tmp/up > $OUT/fl_chunks_ce.log 2>&1
echo "chunks: $? at $((SECONDS-t0)) s"; cat $OUT/fl_chunks_ce.log | grep -v Warn
