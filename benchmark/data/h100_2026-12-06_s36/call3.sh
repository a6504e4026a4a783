#!/usr/bin/env bash
# Session 36 (scratch), call 3: call 2's 18 model-sized cases that ran out of memory beside three other workers on an
# 80 GB card, alone.
nvidia-smi --query-gpu=name --format=csv,noheader
cd .gpu-run
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider $(cat ../.whl/s36/oom_rerun.txt) > $OUT/oom_rerun.log 2>&1
echo "rerun: $?"; grep -E "^FAILED|passed|failed" $OUT/oom_rerun.log | tail -20
