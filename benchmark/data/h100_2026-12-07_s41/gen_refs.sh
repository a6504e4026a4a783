#!/usr/bin/env bash
# Session 41: the kernels of refs_s41.py generated into .gpu-run (run from the checkout root, after
# python3 .ci/make_gpu_checkout.py and the s38, s39 and s40 gen_refs.sh).
set -eu
D=benchmark/data/h100_2026-12-07_s41
for pair in centered_expm1:s41_centered_expm1 ErfcRMSNorm:s41_erfc_rms_norm log1p_share:s41_log1p_share \
  vocab_softmax:s41_vocab_softmax ScaledLogSoftmax:s41_scaled_log_softmax \
  kd_masked:s41_kd_masked xlogy_gate:s41_xlogy_gate \
  masked_inf_softmax:s41_masked_inf_softmax LogitAdjustedCE:s41_logit_adjusted_ce flattened_ce:s41_flattened_ce \
  fake_quant:s41_fake_quant new_ops:s41_new_ops HeldActivations:s41_held_activations; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s41.py:${pair%%:*} --repo .gpu-run --force-new
done
for b in kl_div jsd; do
  python3 -m tools.kernelgen new s41_$b --reference $b --repo .gpu-run --force-new
done
