#!/usr/bin/env bash
# Session 43, call 1: issue 43 item 1's schedules measured before one is built (schedule_probe.py). Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cp benchmark/data/s43/schedule_probe.py .gpu-run/
cd .gpu-run && PYTHONPATH=src:. timeout 400 python3 schedule_probe.py 2>&1 | tee $OUT/schedule_probe.log | tail -80
