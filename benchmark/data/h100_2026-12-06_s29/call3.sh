#!/usr/bin/env bash
# Session 29 (scratch), call 3: the losses against upstream 0.8.5 (GPU-only, 5 rounds), and the fused linear CE's
# per-chunk matmul rates on this card.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 200 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream --rounds 5 --gpu-time --speed-only --bt 8192 --sizes 32000 128256 \
    --kernel cross_entropy_gen=cross_entropy --kernel kl_div_gen=kl_div --kernel jsd_gen=jsd --kernel tvd_gen=tvd \
    --csv $OUT/losses.csv > $OUT/losses.log 2>&1
echo "losses: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy\|Error" $OUT/losses.log | head -40
timeout 200 python3 $H/fl_ops.py > $OUT/fl_ops.log 2>&1; echo "ops: $? at $((SECONDS-t0)) s"; cat $OUT/fl_ops.log
