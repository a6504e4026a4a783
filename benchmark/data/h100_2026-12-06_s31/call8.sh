#!/usr/bin/env bash
# Session 31 (scratch), call 8: where DPO's step syncs the host (sync_where.py), on any card; on an H200 then
# issue 43's fused rows (call7.sh).
set -u
cd .gpu-run
PYTHONPATH=src:. timeout 90 python3 ../.whl/s31/sync_where.py dpo_sigmoid,orpo_odds_ratio > $OUT/sync_where.log 2>&1
echo "sync: $?"; grep -v Warn $OUT/sync_where.log | tail -30
cd ..
bash .whl/s31/call7.sh
