#!/usr/bin/env bash
# Session 47, call 2 (after ../h200_2026-12-07_s38/callAB.sh, issue 43's table): fl_probe.py (item 1: the loss
# kernel's second sweep walked backwards, the products at the rule's chunk and whole, whole steps against
# torch.compile), then the generated tests of the tier-1/2 kernels at the commit under test (session 46's test
# template change after its GPU run: gradients of parameter-less kernels read plainly; the row-block launch's
# settings picked in Python). .gpu-run rebuilt at that commit (make_gpu_checkout.py, the gen_refs.sh of s38-s42,
# ../s42/list_tier12.py); carry .gpu-run and .whl. $1: the seconds the call may take (default 585).
set -u
t0=$SECONDS
left=${1:-585}
remaining() { echo $((left - 10 - SECONDS + t0)); }
upto() { local r; r=$(remaining); echo $((r < $1 ? r : $1)); }
nvidia-smi --query-gpu=name --format=csv,noheader
P=$(pwd)/benchmark/data/s47
cd .gpu-run
export PYTHONPATH=src:.
timeout $(upto 150) python3 $P/fl_probe.py > $OUT/fl_probe.log 2>&1
echo "probe: $? at $((SECONDS - t0)) s"; cat $OUT/fl_probe.log
timeout $(upto 330) python3 -m pytest -q -p no:cacheprovider -n 8 $(cat tier12_tests.txt) > $OUT/tier12_tests.log 2>&1
echo "tier-1/2 tests: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/tier12_tests.log | tail -8
