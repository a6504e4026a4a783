#!/usr/bin/env bash
# Session 29 (scratch), call 10: tanh_from_exp's series to degree 7 (the x^9 term, under 3e-10 of tanh where the
# series is used, left out): the generated tests of every kernel that imports it, then DyT and GeGLU (tanh GELU)
# against upstream 0.8.5, GPU-only ms, 5 rounds.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider test/transformers/test_dyt.py test/transformers/test_dyt_gen.py \
  test/transformers/test_geglu.py test/transformers/test_geglu_gen.py test/transformers/test_narrow_geglu_map.py \
  test/transformers/test_quarter_mix_map.py test/transformers/test_tanh_gate_ref.py > $OUT/series7_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/series7_tests.log
timeout 200 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream --rounds 5 --gpu-time --speed-only --bt 16384 --kernel dyt_gen=dyt \
    --kernel geglu_gen=geglu --csv $OUT/series7_table.csv > $OUT/series7_table.log 2>&1
echo "table: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy\|Error" $OUT/series7_table.log
