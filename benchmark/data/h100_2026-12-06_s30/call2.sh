#!/usr/bin/env bash
# Session 30 (scratch), call 2: two-stage post-training losses, chunks of G whole groups against upstream's peak at
# T 128 and T 1024 (B 8), and torch.compile at T 1024.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
L=kto_sigmoid=kto,dpo_sigmoid=dpo,grpo_kl=grpo
ROUNDS=3 timeout 150 python3 $H/s30/post_rule.py /tmp/up 128 $L 2,3,4,8 > $OUT/post_rule_t128.log 2>&1
echo "T128: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_t128.log | grep "^|\|^#\|Error\|NVIDIA"
timeout 400 python3 $H/s30/post_rule.py /tmp/up 1024 $L 2,3,4 compile > $OUT/post_rule_t1024.log 2>&1
echo "T1024: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_t1024.log | grep "^|\|^#\|Error\|NVIDIA"
