#!/usr/bin/env bash
# Session 44, call 1: Triton d(weight) accumulation and logits-with-statistics against cuBLAS (probe.py). Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp benchmark/data/s44/probe.py benchmark/data/s44/probe_kernels.py benchmark/data/s43/schedule_probe.py .gpu-run/
cd .gpu-run && PYTHONPATH=src:. timeout 560 python3 probe.py 2>&1 | tee $OUT/probe.log | tail -70
