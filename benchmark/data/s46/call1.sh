#!/usr/bin/env bash
# Session 46, call 1: the GPU tests owed since sessions 43-45, then the plain tier-1 launch probe.
# Run on .gpu-run rebuilt at the commit under test (python3 .ci/make_gpu_checkout.py, the gen_refs.sh of s38-s42,
# ../s42/list_tier12.py); carry .gpu-run and .whl (upstream 0.8.5's wheel, upstream_liger.py).
# 1. the index-map and broadcast kernels whose host code session 45 changed (test_*_map.py, test_*_bc.py);
# 2. plain_tier1_probe.py (geglu: tile walk vs upstream vs one row a program vs a (row, column tile) grid);
# 3. the losses' generated tests (session 43 changed their templates), then the fused linear forms'.
set -u
t0=$SECONDS
left=${1:-585}
remaining() { echo $((left - 10 - SECONDS + t0)); }
upto() { local r; r=$(remaining); echo $((r < $1 ? r : $1)); }
nvidia-smi --query-gpu=name --format=csv,noheader
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
H=$(pwd)/.whl
P=$(pwd)/benchmark/data/s46
cd .gpu-run
export PYTHONPATH=src:.
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 test/transformers/test_*_map.py test/transformers/test_*_bc.py \
  > $OUT/maps_bc_tests.log 2>&1
echo "index map and broadcast tests: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/maps_bc_tests.log | tail -6
timeout 100 python3 $P/plain_tier1_probe.py /tmp/up $H > $OUT/plain_tier1_probe.log 2>&1
echo "probe: $? at $((SECONDS - t0)) s"; cat $OUT/plain_tier1_probe.log | grep -v "^ "
timeout $(upto 120) python3 -m pytest -q -p no:cacheprovider -n 4 $(cat tier3_tests.txt) > $OUT/tier3_tests.log 2>&1
echo "tier 3 tests: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/tier3_tests.log | tail -6
timeout $(upto 260) python3 -m pytest -q -p no:cacheprovider -n 2 test/transformers/test_fused_linear_*.py > $OUT/fl_tests.log 2>&1
echo "fused tests -n 2: $? at $((SECONDS-t0)) s"; tail -n 1 $OUT/fl_tests.log
grep -E "^FAILED" $OUT/fl_tests.log | grep -v OutOfMemory | head
