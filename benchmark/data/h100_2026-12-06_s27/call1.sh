#!/usr/bin/env bash
# Session 27 (scratch): LayerNorm backward variants at 4096/8192/14336 (issue 43 item 4); tier-3 tests of the
# changed template (poly-1, cross entropy, distillation); poly-1 before/after b5dd184.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 220 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 4096 8192 14336 \
  --variant $H/var/layer_norm_gen_A.py $H/var/layer_norm_gen_A32.py $H/var/layer_norm_gen_D.py \
  $H/var/layer_norm_gen_D_2_8.py $H/var/layer_norm_gen_D_1_8.py > $OUT/ln_variants.log 2>&1
echo "ln variants: $? at $((SECONDS-t0)) s"; grep "^|\|copy\|Error\|error" $OUT/ln_variants.log | head -40
timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_poly1_cross_entropy.py \
  test/transformers/test_cross_entropy_gen.py test/transformers/test_distill_kl.py > $OUT/tier3_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -4 $OUT/tier3_tests.log
timeout 120 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger torch_compile --bt 8192 --sizes 32000 128256 --rounds 5 --gpu-time --speed-only \
  --kernel poly1_cross_entropy=- --kernel poly1_cross_entropy_before=- --csv $OUT/poly1.csv > $OUT/poly1.log 2>&1
echo "poly1: $? at $((SECONDS-t0)) s"; grep "^|\|copy" $OUT/poly1.log | head -20
