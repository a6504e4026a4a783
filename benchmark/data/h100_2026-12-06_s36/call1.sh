#!/usr/bin/env bash
# Session 36 (scratch), call 1: issue 43's fused linear rows on an H200 (s35/callA.sh), then the fp32 log-prob bias check.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
t0=$SECONDS
(cd .gpu-run && PYTHONPATH=src:. timeout 60 python3 ../.whl/s36/lse_bias.py > $OUT/lse_bias.log 2>&1); echo "lse: $?"; cat $OUT/lse_bias.log | tail -6
bash .whl/s36/callA.sh
