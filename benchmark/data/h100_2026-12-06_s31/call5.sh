#!/usr/bin/env bash
# Session 31 (scratch), call 5: compare_post_training.py's rows (full mode, host included) at B 8 x T 1024 for the
# CSV after ea0437b; on an H200 also the bf16 matmul rate and fused linear CE and the distillation loss.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 270 python3 benchmark/scripts/compare_post_training.py --upstream /tmp/up --helper-dir $H \
  --kernel kto_sigmoid=kto --kernel dpo_sigmoid=dpo --kernel orpo_odds_ratio=orpo --kernel simpo_margin=simpo \
  --kernel grpo_kl=- --csv $OUT/post_training.csv > $OUT/post_training.log 2>&1
echo "post: $? at $((SECONDS-t0)) s"; grep "^|" $OUT/post_training.log
case "$card" in *H200*) ;; *) exit 0 ;; esac
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout $((585-SECONDS+t0)) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
