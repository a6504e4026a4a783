#!/usr/bin/env bash
# Session 29 (scratch), call 12: DPO and KTO (two-stage fused losses) at larger chunks of whole groups than the
# template's, against upstream and torch.compile (full mode, one process).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
for args in "dpo_sigmoid dpo 4096,8192" "kto_sigmoid kto 2048,4096"; do
  set -- $args
  timeout 170 python3 $H/post_chunks_v1.py $1 $2 $3 /tmp/up $H > $OUT/post_chunks_$1.log 2>&1
  echo "$1: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|^#\|Error" $OUT/post_chunks_$1.log
done
