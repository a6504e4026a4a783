#!/usr/bin/env bash
# Session 38, call A: issue 43's fused linear rows on the card lent (copy and matmul rates in the process; cross entropy
# and the KL distillation against upstream 0.8.5 and torch.compile, GPU-only, 5 rounds, peak MB), then the five
# post-training losses. Run from the repository root with .gpu-run (.ci/make_gpu_checkout.py, then gen_refs.sh) and .whl/
# (upstream's wheel, matmul_rate.py, upstream_liger.py, s38/post_rule.py: copies of ../h100_2026-12-06_s31/ and _s30/).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout 280 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
L=kto_sigmoid=kto,dpo_sigmoid=dpo,grpo_kl=grpo,orpo_odds_ratio=orpo,simpo_margin=simpo
NO_UPSTREAM=grpo timeout $((585-SECONDS+t0)) python3 $H/s38/post_rule.py /tmp/up 1024 $L 99 compile > $OUT/post_rule_t1024.log 2>&1
echo "post: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/post_rule_t1024.log | grep "^|\|^#\|Error\|NVIDIA"
