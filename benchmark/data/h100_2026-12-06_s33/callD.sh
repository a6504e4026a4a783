#!/usr/bin/env bash
# Session 33 (scratch), call D: kernels of this session's new capabilities, generated at 4bde70d into the GPU checkout
# from the sweep's references: a GroupNorm of images (B, C, H, W = x.shape), HF RoPE with unsqueeze_dim=2, Hinton KD at
# T 4 (one KL sum a row) and GRPO with an entropy bonus (two statistics a token), both with their fused linear
# kernels, clamp with tensor bounds: their generated tests on the GPU (fused ones in one process).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
timeout 200 python3 -m pytest -q -n 3 -p no:cacheprovider test/transformers/test_image_gn.py \
  test/transformers/test_rope_seq_first.py test/transformers/test_hinton_kd.py test/transformers/test_grpo_entropy.py \
  test/transformers/test_clamp_tensor_bounds.py > $OUT/new_kernels.log 2>&1
echo "standalone: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/new_kernels.log | tail -4
timeout 300 python3 -m pytest -q -p no:cacheprovider test/transformers/test_fused_linear_hinton_kd.py \
  test/transformers/test_fused_linear_grpo_entropy.py > $OUT/new_fused.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/new_fused.log | tail -4
