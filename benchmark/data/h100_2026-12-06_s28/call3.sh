#!/usr/bin/env bash
# Session 28 (scratch), call 3: issue 43's fused linear rows as the template now generates them (d31dc54): the KL
# distillation's generated tests on the GPU, the matmul and copy rates, and cross entropy and KL distillation against
# upstream 0.8.5 and torch.compile (GPU-only, 5 rounds, peak MB; rows for all_benchmark_data.csv).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_distill_kl.py \
  test/transformers/test_fused_linear_distill_kl.py > $OUT/distill_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/distill_tests.log
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout 360 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
