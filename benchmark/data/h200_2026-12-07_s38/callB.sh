#!/usr/bin/env bash
# Session 38, call B: issue 43's norm rows, the five reference styles at 16384 x {4096, 8192, 14336} against upstream
# 0.8.5 and torch.compile (GPU-only, 5 rounds; peak MB with d(y) handed over by autograd), the copy rate in the process.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
[ -d /tmp/up ] || pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
for sizes in "14336" "4096 8192"; do
  tag=${sizes// /_}
  timeout $(( (585-SECONDS+t0) / 2 + 20 )) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 16384 --sizes $sizes --rounds 5 --gpu-time --memory-dy autograd \
    --kernel gemma_style_rms_norm_gen=gemma_rms_norm --kernel weightless_rms_norm_gen=weightless_rms_norm \
    --kernel add_rms_norm_gen=fused_add_rms_norm --kernel mean_square_layer_norm_gen=layer_norm \
    --kernel normalize_rows_gen=- --csv $OUT/norms_$tag.csv > $OUT/norms_$tag.log 2>&1
  echo "norms $sizes: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy" $OUT/norms_$tag.log | head -40
done
