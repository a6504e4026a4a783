#!/usr/bin/env bash
# Session 34 (scratch), call R: after the row groups' broadcast gradient is summed in fp32 and rounded once, every RoPE
# kernel's generated tests (3 workers), and ORPO / SimPO standalone on one worker (call T's failures there were the 80 GB
# card out of memory with 3 workers).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
T=test/transformers
timeout 200 python3 -m pytest -q -n 3 -p no:cacheprovider $T/test_*rope*.py $T/test_gptj_rope_4d_map.py > $OUT/rope.log 2>&1
echo "rope: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/rope.log | tail -8
timeout $((400-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider $T/test_orpo_odds_ratio.py $T/test_simpo_margin.py > $OUT/orpo_simpo.log 2>&1
echo "orpo+simpo: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/orpo_simpo.log | tail -6
