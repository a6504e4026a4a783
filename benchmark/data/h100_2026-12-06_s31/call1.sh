#!/usr/bin/env bash
# Session 31 (scratch), call 1: the two-stage fused losses with the skip decided on the device (scale kernel):
# their generated tests on the GPU, then the five post-training losses at B 8 x T 1024 against torch.compile and
# upstream 0.8.5 (GPU-only ms, median of 5 rounds, peak MB), one process per loss.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
tests=""
for n in dpo_sigmoid grpo_kl kto_sigmoid orpo_odds_ratio simpo_margin tempered_dpo listwise_ranking; do tests="$tests test/transformers/test_fused_linear_$n.py"; done
timeout 150 python3 -m pytest -q -n 2 -p no:cacheprovider $tests > $OUT/staged_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -1 $OUT/staged_tests.log
L=kto_sigmoid=kto,dpo_sigmoid=dpo,grpo_kl=grpo,orpo_odds_ratio=orpo,simpo_margin=simpo
NO_UPSTREAM=grpo timeout $((560-SECONDS+t0)) python3 $H/s31/post_rule.py /tmp/up 1024 $L 99 compile > $OUT/post_rule_t1024.log 2>&1
echo "T1024: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_t1024.log | grep "^|\|^#\|Error\|NVIDIA"
