#!/usr/bin/env bash
# Session 38: the fused linear distillation of call A and the two losses with a second output, generated into
# .gpu-run (run from the checkout root).
set -eu
D=benchmark/data/h200_2026-12-07_s38
python3 -m tools.kernelgen new distill_kl --reference $D/refs_fl.py:distillation --fused-linear --repo .gpu-run --force-new
python3 -m tools.kernelgen new s38_ce_and_z --reference $D/refs_outputs.py:ce_and_z --fused-linear --repo .gpu-run --force-new
python3 -m tools.kernelgen new s38_dpo_margin --reference $D/refs_outputs.py:dpo_and_margin --fused-linear --repo .gpu-run --force-new
