#!/usr/bin/env bash
# Session 27 (scratch): LayerNorm backward with co-scheduled column-block programs whose row walk is software
# pipelined (tl.range num_stages), each variant in its own process (issue 43 item 4); on an H200 also issue 43 item
# 1's fused linear table with the matmul rate.
set -u
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
for v in D_1_8 P_1_8_2 P_1_8_3 P_1_16_2 P_2_8_2; do
  timeout 60 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
    --kernel layer_norm_gen=layer_norm --sizes 14336 --no-compile --variant $H/var/layer_norm_gen_$v.py > $OUT/ln_$v.log 2>&1
  echo "$v: $? at $((SECONDS-t0)) s"; grep "^| layer\|Error" $OUT/ln_$v.log | grep -v upstream | tail -3
done
case "$GPU" in *H200*)
  python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
  timeout 300 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
    --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
    --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
  echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20 ;;
esac
