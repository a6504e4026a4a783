#!/usr/bin/env bash
# Session 43, call 2: the loss kernel's launch on a chunk and whole steps against torch.compile (schedule_probe2.py).
# Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp benchmark/data/s43/schedule_probe.py benchmark/data/s43/schedule_probe2.py .gpu-run/
cd .gpu-run && PYTHONPATH=src:. timeout 500 python3 schedule_probe2.py 2>&1 | tee $OUT/schedule_probe2.log | grep -v Warn | tail -70
