#!/usr/bin/env bash
# Session 27 (scratch): issue 43 item 1's table: fused linear CE and KL distillation, generated vs upstream 0.8.5 vs
# torch.compile, GPU-only and peak MB, with the matmul and copy rates of the same machine.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
which ncu nsys 2>&1 | head -3
timeout 110 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 8192 14336 --no-compile \
  --variant $H/var/layer_norm_gen_B.py $H/var/layer_norm_gen_B2.py $H/var/layer_norm_gen_D_1_8.py > $OUT/ln_variants2.log 2>&1
echo "ln variants: $? at $((SECONDS-t0)) s"; grep "^|\|copy\|Error\|error" $OUT/ln_variants2.log | head -40
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout 400 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
