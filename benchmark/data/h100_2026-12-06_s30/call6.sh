#!/usr/bin/env bash
# Session 30 (scratch), call 6: GPU time by kernel of DPO and KTO (new chunk rule) beside torch.compile's.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 300 python3 $H/s30/post_profile.py dpo_sigmoid,kto_sigmoid > $OUT/post_profile.log 2>&1
echo "profile: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_profile.log | grep "^|\|^#\|Error\|NVIDIA"
