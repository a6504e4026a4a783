#!/usr/bin/env bash
# Session 29 (scratch), call 6: whole tiles in the tier-1 backward with parameter gradients (no masks, no selects):
# the generated tests of the three kernels whose files changed, then forward/backward GPU us against the files before
# the change (var/*_old.py) in the same process, upstream's DyT beside.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider test/transformers/test_dyt.py test/transformers/test_dyt_gen.py \
  test/transformers/test_snake_gen.py > $OUT/whole_tiles_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/whole_tiles_tests.log
for k in dyt_gen=dyt snake_gen=-; do
  name=${k%%=*}
  timeout 150 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H --no-compile \
    --kernel $k --sizes 4096 8192 14336 --reps 50 --variant $H/var/${name}_old.py > $OUT/whole_tiles_$name.log 2>&1
  echo "$name: $? at $((SECONDS-t0)) s"; grep "^| \|copy\|Error" $OUT/whole_tiles_$name.log
done
timeout 200 python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --rounds 5 --gpu-time --bt 16384 --kernel dyt_gen=dyt --kernel dyt=dyt \
    --csv $OUT/dyt_table.csv > $OUT/dyt_table.log 2>&1
echo "table: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy\|Error" $OUT/dyt_table.log
