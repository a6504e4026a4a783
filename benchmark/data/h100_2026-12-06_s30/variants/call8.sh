#!/usr/bin/env bash
# Session 30 (scratch), call 8: the two-stage fused losses' scale kernel (the skip decided on the device): their
# tests at the small shape (fp32 and bf16), then DPO's GPU-only step beside torch.compile.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do tests="$tests test/transformers/test_fused_linear_$n.py"; done
timeout 40 python3 -m pytest -q -n 4 -p no:cacheprovider -k "not 128256" $tests > $OUT/staged_tests_small.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -1 $OUT/staged_tests_small.log
NO_UPSTREAM=dpo ROUNDS=3 timeout 50 python3 $H/s30/post_rule.py /tmp/up 1024 dpo_sigmoid=dpo 99 compile > $OUT/post_rule_dpo.log 2>&1
echo "T1024: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_dpo.log | grep "^|\|^#\|Error\|NVIDIA"
