#!/usr/bin/env bash
# Session 30 (scratch), call 7: the two-stage fused losses' backward hands the gradients over when grad_output is 1
# (no pass over d(weight)): their tests, GPU time by kernel, and B 8 x T 1024 against torch.compile.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do tests="$tests test/transformers/test_fused_linear_$n.py"; done
timeout 200 python3 -m pytest -q -n 2 -p no:cacheprovider $tests > $OUT/staged_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -1 $OUT/staged_tests.log
timeout 60 python3 $H/s30/post_profile.py dpo_sigmoid > $OUT/post_profile.log 2>&1
echo "profile: $? at $((SECONDS-t0)) s"; grep -A6 "^## dpo_sigmoid generated" $OUT/post_profile.log
L=kto_sigmoid=kto,dpo_sigmoid=dpo,grpo_kl=grpo
NO_UPSTREAM=grpo timeout 240 python3 $H/s30/post_rule.py /tmp/up 1024 $L 99 compile > $OUT/post_rule_t1024.log 2>&1
echo "T1024: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_t1024.log | grep "^|\|^#\|Error\|NVIDIA"
