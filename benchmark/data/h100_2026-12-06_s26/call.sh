#!/usr/bin/env bash
# Session 26 (scratch): the changed tier-3 template's generated tests on the GPU (any card), then issue 41's
# H200 table (before/after vs upstream vs torch.compile, compiled small-shape table with host time).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl > /dev/null 2>&1
cd .gpu-run
tests=""
for f in $(grep -l "_on_device" src/liger_kernel/ops/*.py); do
  b=$(basename $f .py)
  tests="$tests $(ls test/transformers/test_${b}.py test/transformers/test_fused_linear_${b}.py 2>/dev/null | tr '\n' ' ')"
done
PYTHONPATH=src:. timeout ${T_TESTS:-120} python3 -m pytest -q -p no:cacheprovider -rf -n 4 $tests > $OUT/tier3_tests.log 2>&1
echo "tier-3 tests: $? at $((SECONDS-t0)) s | $(tail -n 1 $OUT/tier3_tests.log)"; grep "^FAILED" $OUT/tier3_tests.log | head
cd ..
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  T_BEFORE=190 T_CE=60 T_COMPILED=90 PARTS="ce compiled before" bash .whl/bench.sh
else
  T_CE=60 T_COMPILED=90 PARTS="ce compiled" bash .whl/bench.sh
fi
echo "done at $((SECONDS-t0)) s"
