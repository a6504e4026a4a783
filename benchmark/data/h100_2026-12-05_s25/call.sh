#!/usr/bin/env bash
# Session 25 call B (scratch): issue 41's small-shape compiled table; issue 43's matmul rate and fused linear table
# (cross entropy and a KL distillation loss vs upstream vs torch.compile, GPU time, 5 rounds).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS; H=$PWD/.whl
T_COMPILED=190 PARTS=compiled bash .whl/bench.sh
echo "compiled at $((SECONDS-t0)) s"
cd .gpu-run; export PYTHONPATH=src:.
# The changed tier-3 template (the logits' buffer outside torch.compile only): its kernels' generated tests.
timeout 90 python3 -m pytest -q -p no:cacheprovider -rf -n 1 test/transformers/test_cross_entropy_gen.py \
  test/transformers/test_fused_linear_cross_entropy_gen.py > $OUT/ce_tests.log 2>&1
echo "ce tests: $? at $((SECONDS-t0)) s | $(tail -n 1 $OUT/ce_tests.log)"; grep "^FAILED" $OUT/ce_tests.log | head
# Issue 43's fused table is an H200 run; an H100's is in benchmark/data/h100_2026-12-05_s22 and _s24.
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: no fused table"; exit 0; }
python3 - <<'PY' > $OUT/matmul_rate.log 2>&1
import torch, triton
a = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16); w = torch.randn(128256, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    ms = triton.testing.do_bench(lambda: a @ w.t(), rep=300, return_mode="median")
    print(f"matmul [8192,4096]x[4096,128256] bf16: {ms:.3f} ms = {2 * 8192 * 4096 * 128256 / ms / 1e9:.0f} TFLOP/s")
PY
cat $OUT/matmul_rate.log
timeout $((575 - SECONDS + t0)) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
    --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy --kernel fused_linear_distill_kl=fused_linear_jsd \
    --frozen teacher_logits --csv $OUT/fused.csv > $OUT/fused.log 2>&1
echo "fused table: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused.log | head -30
