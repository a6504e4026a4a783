#!/usr/bin/env bash
# Session 38, call E (device time scarce: one call): the generated tests of losses whose Function changed (a second
# output refused by one-kernel losses, differentiated by two-stage ones), then issue 43's fused linear rows and the
# norm rows at 14336 as in callAB.sh, each under the time left.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
T=test/transformers
timeout 130 python3 -m pytest -q -p no:cacheprovider -n 2 $T/test_s38_ce_and_z.py $T/test_s38_dpo_margin.py \
  $T/test_cross_entropy_gen.py $T/test_dpo_sigmoid.py > $OUT/loss_tests.log 2>&1
echo "loss tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/loss_tests.log
timeout 110 python3 -m pytest -q -p no:cacheprovider -n 1 $T/test_fused_linear_s38_ce_and_z.py \
  $T/test_fused_linear_s38_dpo_margin.py > $OUT/fused_tests.log 2>&1
echo "fused tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/fused_tests.log
python3 $H/matmul_rate.py > $OUT/matmul_rate.log 2>&1; cat $OUT/matmul_rate.log
timeout $((470-SECONDS+t0)) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 8192 --hidden 4096 --sizes 128256 --rounds 5 --gpu-time \
  --frozen teacher_logits --kernel fused_linear_cross_entropy_gen=fused_linear_cross_entropy \
  --kernel fused_linear_distill_kl=fused_linear_jsd --csv $OUT/fused_linear.csv > $OUT/fused_linear.log 2>&1
echo "fused rows: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/fused_linear.log | head -20
timeout $((585-SECONDS+t0)) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 16384 --sizes 14336 --rounds 5 --gpu-time --memory-dy autograd \
  --kernel gemma_style_rms_norm_gen=gemma_rms_norm --kernel weightless_rms_norm_gen=weightless_rms_norm \
  --kernel add_rms_norm_gen=fused_add_rms_norm --kernel mean_square_layer_norm_gen=layer_norm \
  --kernel normalize_rows_gen=- --csv $OUT/norms_14336.csv > $OUT/norms_14336.log 2>&1
echo "norms 14336: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy" $OUT/norms_14336.log | head -40
