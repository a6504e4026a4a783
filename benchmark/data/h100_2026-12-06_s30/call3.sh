#!/usr/bin/env bash
# Session 30 (scratch), call 3: the two-stage losses' new chunk rule (whole groups up to hidden rows): their generated
# tests on this card, then B 8 x T 1024 against the old rule (1 group), upstream and torch.compile.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo; do tests="$tests test/transformers/test_fused_linear_$n.py"; done
timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider $tests > $OUT/staged_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/staged_tests.log
L=kto_sigmoid=kto,dpo_sigmoid=dpo,grpo_kl=grpo,orpo_odds_ratio=orpo,simpo_margin=simpo
timeout 340 python3 $H/s30/post_rule.py /tmp/up 1024 $L 1 compile > $OUT/post_rule_new_t1024.log 2>&1
echo "T1024: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_new_t1024.log | grep "^|\|^#\|Error\|NVIDIA"
