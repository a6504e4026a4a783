#!/usr/bin/env bash
# Session 33 (scratch), call A: df58972 (tier-3 kernels in 1-D chunks with scalar statistics) and f647b39 (the fused
# linear template's host change): the generated tests of every tier-3 loss and its fused linear kernel on the GPU,
# standalone losses on 3 workers, fused ones in one process (more workers run an 80 GB card out of memory).
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
t0=$SECONDS
H=$(cd .whl && pwd)
cd .gpu-run
standalone=""; fused=""
for t in $(cat $H/s33/t3_tests.txt); do case "$t" in *fused_linear*) fused="$fused $t" ;; *) standalone="$standalone $t" ;; esac; done
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -n 3 -p no:cacheprovider $standalone > $OUT/t3_standalone.log 2>&1
echo "standalone: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/t3_standalone.log | tail -6
PYTHONPATH=src:. timeout $((580-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider $fused > $OUT/t3_fused.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/t3_fused.log | tail -6
