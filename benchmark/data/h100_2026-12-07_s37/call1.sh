#!/usr/bin/env bash
# Session 37, call 1: this session's sample references' generated tests on the GPU, then the d(weight) GEMM probe.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
files=$(ls test/transformers/test_s37_*.py | tr '\n' ' ')
PYTHONPATH=src:. timeout 330 python3 -m pytest -q -p no:cacheprovider -n 2 $files > $OUT/s37_tests.log 2>&1
echo "tests rc=$? in $((SECONDS - t0)) s"; tail -4 $OUT/s37_tests.log
cd ..
left=$((560 - SECONDS))
(cd .whl/s37 && timeout $left python3 dw_gemm.py 640 1024 > $OUT/dw_gemm.log 2>&1); echo "dw rc=$?"
grep -E "TFLOP|best|check" $OUT/dw_gemm.log | head -60
