#!/usr/bin/env bash
# Session 38, one call for issue 43's table (device time is scarce): call A's copy and matmul rates and fused linear
# rows (cross entropy, KL distillation), then call B's norm rows, 14336 first, each step under the time left.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout 230 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
for sizes in "14336" "4096 8192"; do
  tag=${sizes// /_}
  timeout $((585-SECONDS+t0)) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 16384 --sizes $sizes --rounds 5 --gpu-time --memory-dy autograd \
    --kernel gemma_style_rms_norm_gen=gemma_rms_norm --kernel weightless_rms_norm_gen=weightless_rms_norm \
    --kernel add_rms_norm_gen=fused_add_rms_norm --kernel mean_square_layer_norm_gen=layer_norm \
    --kernel normalize_rows_gen=- --csv $OUT/norms_$tag.csv > $OUT/norms_$tag.log 2>&1
  echo "norms $sizes: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy" $OUT/norms_$tag.log | head -40
done
