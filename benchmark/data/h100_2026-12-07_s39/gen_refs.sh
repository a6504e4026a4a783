#!/usr/bin/env bash
# Session 39: the kernels of refs_s39.py generated into .gpu-run (run from the checkout root, after
# python3 .ci/make_gpu_checkout.py and ../h200_2026-12-07_s38/gen_refs.sh).
set -eu
D=benchmark/data/h100_2026-12-07_s39
for pair in SqrtSizeNorm:s39_sqrt_size_norm KeyScaledSoftmax:s39_key_scaled_softmax LayerNormSiLU:s39_layer_norm_silu \
  ChildScaleBlock:s39_child_scale_block SharedWeightCE:s39_shared_weight_ce; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s39.py:${pair%%:*} --repo .gpu-run --force-new
done
