#!/usr/bin/env bash
# Session 37, call 2: after 2f9d809 (sweep tests skip by the backward's rule), a292b17 (token masks drawn 0/1) and
# 56b275e (KTO's baseline probed at three draws): every row kernel's sweep test, then this session's references.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
t0=$SECONDS
PYTHONPATH=src:. timeout 120 python3 -m pytest -q -p no:cacheprovider -n 2 test/transformers -k sweep_matches_split_path > $OUT/sweep_tests.log 2>&1
echo "sweep rc=$? in $((SECONDS - t0)) s"; tail -3 $OUT/sweep_tests.log
plain=$(ls test/transformers/test_s37_*.py | tr '\n' ' ')
fused=$(ls test/transformers/test_fused_linear_s37_*.py | tr '\n' ' ')
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 2 $plain > $OUT/s37_tests.log 2>&1
echo "s37 rc=$? in $((SECONDS - t0)) s"; tail -3 $OUT/s37_tests.log
left=$((550 - SECONDS))
PYTHONPATH=src:. timeout $left python3 -m pytest -q -p no:cacheprovider -n 1 $fused > $OUT/s37_fused_tests.log 2>&1
echo "fused rc=$? in $((SECONDS - t0)) s"; tail -3 $OUT/s37_fused_tests.log
