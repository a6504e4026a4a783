#!/usr/bin/env bash
# Session 42: the kernels of refs_s42.py generated into .gpu-run (run from the checkout root, after
# python3 .ci/make_gpu_checkout.py and the gen_refs.sh of s38, s39, s40 and s41).
set -eu
D=benchmark/data/s42
for pair in atanh_gate:s42_atanh_gate logit_eps:s42_logit_eps acosh_act:s42_acosh_act \
  truncated_gate:s42_truncated_gate AtanhRMSNorm:s42_atanh_rms_norm; do
  python3 -m tools.kernelgen new ${pair#*:} --reference $D/refs_s42.py:${pair%%:*} --repo .gpu-run --force-new --force
done
