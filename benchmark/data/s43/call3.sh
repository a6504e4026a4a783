#!/usr/bin/env bash
# Session 43, call 3, on .gpu-run rebuilt at d69f9cd (the even-chunk rule): issue 43's fused linear rows (copy and
# matmul rates, cross entropy and KL distillation against upstream 0.8.5 and torch.compile, as
# ../h200_2026-12-07_s38/callAB.sh runs them), then every fused linear form's generated tests (2 workers, then the
# ones that ran out of memory again with 1). Carry .gpu-run and .whl.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout 230 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
timeout $((560-SECONDS+t0)) python3 -m pytest -q -n 2 test/transformers/test_fused_linear_*.py > $OUT/fl_tests.log 2>&1
echo "fused tests -n 2: $? at $((SECONDS-t0)) s"; tail -3 $OUT/fl_tests.log
timeout $((590-SECONDS+t0)) python3 -m pytest -q -n 1 --lf test/transformers/test_fused_linear_*.py > $OUT/fl_tests_lf.log 2>&1
echo "fused tests again -n 1: $? at $((SECONDS-t0)) s"; tail -3 $OUT/fl_tests_lf.log
