#!/usr/bin/env bash
# Session 46, call C (short; about 270 s of device time were left): the generated tests of the row-block kernels at
# the commit of their last test-template change (43ed298 and after: gradients read plainly), then the probe's rows at
# 8192 and 14336 (tile walk, row blocks, upstream, one row a program) that call A's 90 s did not reach.
# .gpu-run from python3 .ci/make_gpu_checkout.py alone (the built-ins); carry .gpu-run and .whl.
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
H=$(pwd)/.whl
P=$(pwd)/benchmark/data/s46
cd .gpu-run
export PYTHONPATH=src:.
rows=$(for f in src/liger_kernel/ops/*.py; do grep -q "n_blocks = tl.cdiv(n_cols, BLOCK_SIZE)" $f && echo test/transformers/test_$(basename $f .py).py; done)
echo "row-block kernels: $(echo $rows | wc -w)"
timeout 70 python3 -m pytest -q -p no:cacheprovider -n 4 $rows > $OUT/row_blocks_tests.log 2>&1
echo "row-block tests: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/row_blocks_tests.log | tail -4
timeout 60 python3 $P/plain_tier1_probe.py /tmp/up $H 14336 8192 > $OUT/plain_tier1_probe.log 2>&1
echo "probe: $? at $((SECONDS - t0)) s"; grep "^|" $OUT/plain_tier1_probe.log
