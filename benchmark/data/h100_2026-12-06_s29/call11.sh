#!/usr/bin/env bash
# Session 29 (scratch), call 11: on an H200 only (any other card exits at once), the fused linear CE's per-chunk
# matmul rates and the whole step against its chunk rows: issue 43 item 1's bound on the issue's card.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
case "$gpu" in *H200*) ;; *) exit 0 ;; esac
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 150 python3 $H/fl_ops.py > $OUT/fl_ops_h200.log 2>&1; echo "ops: $? at $((SECONDS-t0)) s"; cat $OUT/fl_ops_h200.log
WHICH=ce CE_CHUNKS="0 768 1024 2048" timeout 300 python3 $H/fl_chunks.py /tmp/up > $OUT/fl_chunks_ce_h200.log 2>&1
echo "chunks: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/fl_chunks_ce_h200.log
