#!/usr/bin/env bash
# Session 47: the kernels of refs_s47.py generated into .gpu-run (run from the checkout root, after
# python3 .ci/make_gpu_checkout.py and the gen_refs.sh of s38, s39, s40, s41 and s42; then ../s42/list_tier12.py).
set -eu
D=benchmark/data/s47
for pair in affine_silu:s47_affine_silu softplus_int:s47_softplus_int TempSoftmax:s47_temp_softmax \
  OffsetRMSNorm:s47_offset_rms_norm cosine_rows:s47_cosine_rows cosine_clamped:s47_cosine_clamped; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s47.py:${pair%%:*} --repo .gpu-run --force-new --force
done
