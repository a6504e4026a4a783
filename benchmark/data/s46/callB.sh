#!/usr/bin/env bash
# Session 46, call B: callA's tests that ran out of memory with several workers on an 80 GB H100 (model-sized losses
# and fused linear forms; .gpu-run/rerun_tier3.txt and rerun_fl.txt, the FAILED ids of callA's logs, every one an
# OutOfMemoryError), one worker each. Then, on an H200 with the time left, issue 43's fused linear rows
# (../h200_2026-12-07_s38/callAB.sh's first part).
# $1: the seconds the call may take (default 480).
set -u
t0=$SECONDS
left=${1:-480}
remaining() { echo $((left - 10 - SECONDS + t0)); }
upto() { local r; r=$(remaining); echo $((r < $1 ? r : $1)); }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
H=$(pwd)/.whl
cd .gpu-run
export PYTHONPATH=src:.
timeout $(upto 120) python3 -m pytest -q -p no:cacheprovider $(cat rerun_tier3.txt) > $OUT/rerun_tier3.log 2>&1
echo "tier 3 reruns, one worker: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/rerun_tier3.log | tail -4
timeout $(upto 300) python3 -m pytest -q -p no:cacheprovider $(cat rerun_fl.txt) > $OUT/rerun_fl.log 2>&1
echo "fused linear reruns, one worker: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/rerun_fl.log | tail -4
if echo "$card" | grep -q H200 && [ "$(remaining)" -gt 150 ]; then
  pip install -q --no-deps --target /tmp/up ../.whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
  python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
  timeout $(remaining) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
    --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
    --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
  echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
fi
