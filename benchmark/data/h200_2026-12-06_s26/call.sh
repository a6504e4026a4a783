#!/usr/bin/env bash
# Session 25 (scratch): issue 41's whole H200 table in one call: geglu / RMSNorm / LayerNorm and cross entropy before
# and after vs upstream vs torch.compile (GPU-only, 5 rounds), then the small-shape compiled table.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 3; }
t0=$SECONDS
T_BEFORE=190 T_CE=60 T_COMPILED=90 PARTS="ce compiled before" bash .whl/bench.sh
echo "done at $((SECONDS-t0)) s"
