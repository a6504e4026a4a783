#!/usr/bin/env bash
# Session 42, call 2: the generated tests of .gpu-run, rebuilt at 9590e9b (bf16 cases against float64, the module
# test's tolerance floored by eager fp32's own error, NaN references not judged, a step's derivative selecting the
# rest of a gradient): the tier-1/2 kernels (tier12_tests.txt, from list_tier12.py), then the losses (tier3_tests.txt);
# on an H200 issue 43's table (../h200_2026-12-07_s38/callAB.sh). Carry .gpu-run and .whl.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
for tier in 12 3; do
  (cd .gpu-run && PYTHONPATH=src:. timeout $([ $tier = 12 ] && echo 230 || echo 130) python3 -m pytest -v \
    -p no:cacheprovider -n 8 $(cat tier${tier}_tests.txt) > $OUT/tier${tier}_tests.log 2>&1)
  echo "tier $tier tests: $? at $((SECONDS-t0)) s"; grep -c " PASSED " $OUT/tier${tier}_tests.log
  grep -E " FAILED |^FAILED|passed|failed" $OUT/tier${tier}_tests.log | tail -12
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmark/data/h200_2026-12-07_s38/callAB.sh
fi
