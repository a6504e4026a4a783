#!/usr/bin/env bash
# Session 31 (scratch), call 2: the two-stage losses with their sequence stage printed as the reference wrote it:
# the generated tests of every two-stage kernel (tier 3 and fused linear) on the GPU; where ORPO's GPU time goes
# beside SimPO's (torch.profiler); then, time left, the five post-training losses against torch.compile and
# upstream 0.8.5 (GPU-only ms, median of 5 rounds, peak MB).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do
  tests="$tests test/transformers/test_$n.py test/transformers/test_fused_linear_$n.py"
done
timeout 200 python3 -m pytest -q -n 2 -p no:cacheprovider $tests test/transformers/test_grpo_token.py > $OUT/staged_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -1 $OUT/staged_tests.log
timeout 100 python3 $H/s31/post_profile.py orpo_odds_ratio,simpo_margin > $OUT/post_profile.log 2>&1
echo "profile: $? at $((SECONDS-t0)) s"; grep -A8 "^## " $OUT/post_profile.log | grep -v "^--"
L=kto_sigmoid=kto,dpo_sigmoid=dpo,grpo_kl=grpo,orpo_odds_ratio=orpo,simpo_margin=simpo
NO_UPSTREAM=grpo timeout $((570-SECONDS+t0)) python3 $H/s31/post_rule.py /tmp/up 1024 $L 99 compile > $OUT/post_rule_t1024.log 2>&1
echo "T1024: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_t1024.log | grep "^|\|^#\|Error\|NVIDIA"
