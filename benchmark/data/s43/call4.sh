#!/usr/bin/env bash
# Session 43, call 4 (never lent in sessions 43 and 44). On an H200: issue 43's whole table
# (../h200_2026-12-07_s38/callAB.sh: the fused linear rows first, then the norms, 14336 wide first). On another card:
# the losses' generated tests (3 workers), the fused linear forms' (2 workers, then those out of memory again with 1).
# $1: the seconds the call may take (default 585; less device time left cuts the later steps, what ran stays in $OUT).
# Run it on .gpu-run rebuilt at the commit under test (python3 .ci/make_gpu_checkout.py, the gen_refs.sh of s38-s42,
# ../s42/list_tier12.py). Carry .gpu-run and .whl.
set -u
left=${1:-585}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
t0=$SECONDS
remaining() { echo $((left - 10 - SECONDS + t0)); }
upto() { local r; r=$(remaining); echo $((r < $1 ? r : $1)); }  # the remaining seconds, at most $1
if echo "$card" | grep -q H200; then
  timeout $(remaining) bash benchmark/data/h200_2026-12-07_s38/callAB.sh
  exit
fi
cd .gpu-run
export PYTHONPATH=src:.
timeout $(upto 120) python3 -m pytest -q -p no:cacheprovider -n 3 $(cat tier3_tests.txt) > $OUT/tier3_tests.log 2>&1
echo "tier 3 tests: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/tier3_tests.log | tail -6
timeout $(upto 260) python3 -m pytest -q -n 2 test/transformers/test_fused_linear_*.py > $OUT/fl_tests.log 2>&1
echo "fused tests -n 2: $? at $((SECONDS-t0)) s"; tail -n 1 $OUT/fl_tests.log
grep -E "^FAILED" $OUT/fl_tests.log | grep -vc OutOfMemory
timeout $(remaining) python3 -m pytest -q -n 1 --lf test/transformers/test_fused_linear_*.py > $OUT/fl_tests_lf.log 2>&1
echo "fused tests again -n 1: $? at $((SECONDS-t0)) s"; tail -n 1 $OUT/fl_tests_lf.log
