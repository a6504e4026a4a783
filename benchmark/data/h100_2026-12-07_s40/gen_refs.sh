#!/usr/bin/env bash
# Session 40: the kernels of refs_s40.py generated into .gpu-run (run from the checkout root, after
# python3 .ci/make_gpu_checkout.py and ../h200_2026-12-07_s38/gen_refs.sh), the first with its fused linear form.
set -eu
D=benchmark/data/h100_2026-12-07_s40
python3 -m tools.kernelgen new s40_focal_upcast --reference $D/refs_s40.py:focal_upcast --repo .gpu-run --force-new --fused-linear
for pair in smoothed_weighted_ce:s40_smoothed_weighted_ce NormSiLU:s40_norm_silu HeldGroupNorm:s40_held_group_norm; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s40.py:${pair%%:*} --repo .gpu-run --force-new
done
for pair in expm1_gate:s40_expm1_gate elu_gate:s40_elu_gate erfc_gate:s40_erfc_gate log1p_gate:s40_log1p_gate \
  LayerNormGelu:s40_layer_norm_gelu; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s40.py:${pair%%:*} --repo .gpu-run --force-new
done
python3 -m tools.kernelgen new s40_jsd_beta --reference $D/refs_s40.py:jsd_beta --repo .gpu-run --force-new --fused-linear
for pair in softmax_dim2:s40_softmax_dim2 masked_softmax:s40_masked_softmax; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s40.py:${pair%%:*} --repo .gpu-run --force-new
done
