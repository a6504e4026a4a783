#!/usr/bin/env bash
# Session 36 (scratch), call 1: issue 43's fused linear rows on an H200 (s35/callA.sh), then the fp32 log-prob bias check.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
t0=$SECONDS
(cd .gpu-run && PYTHONPATH=src:. timeout 60 python3 ../.whl/s36/lse_bias.py > $OUT/lse_bias.log 2>&1); echo "lse: $?"; cat $OUT/lse_bias.log | tail -6
# Session 35's call A (benchmark/data/h100_2026-12-06_s35/callA.sh) with its last step's limit at 555 s, not 590, to
# leave room for the check above (it ran as a copy with that one number changed, .whl/s36/callA.sh).
sed 's/590-SECONDS/555-SECONDS/' benchmark/data/h100_2026-12-06_s35/callA.sh | bash
