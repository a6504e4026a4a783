#!/usr/bin/env bash
# Session 46, call A (any card): the generated tests of every kernel whose template changed since the last GPU run,
# and the row-block launch (ops_tier1_rows.py.j2) against the tile walk it replaces, upstream and torch.compile.
# Run on .gpu-run rebuilt at the commit under test (python3 .ci/make_gpu_checkout.py, the gen_refs.sh of s38-s42,
# ../s42/list_tier12.py); carry .gpu-run and .whl (upstream 0.8.5's wheel, upstream_liger.py).
#   1. the tier-1 kernels launched by row blocks (their ops files compute n_blocks), bf16 included;
#   2. plain_tier1_probe.py: geglu's forward and backward, CUDA-graph GPU time, row blocks vs the tile walk;
#   3. compare_with_upstream.py: geglu, swiglu_gen, gated_sin_gen (its backward's sin/cos launch), 16384 x {4096,
#      14336}, against upstream 0.8.5 and torch.compile, GPU time;
#   4. the index-map and broadcast kernels (session 45's host code), the losses (session 43's templates, session 46's
#      eager fp32 floor), then the fused linear forms, each under the time left.
# $1: the seconds the call may take (default 585).
set -u
t0=$SECONDS
left=${1:-585}
remaining() { echo $((left - 10 - SECONDS + t0)); }
upto() { local r; r=$(remaining); echo $((r < $1 ? r : $1)); }
nvidia-smi --query-gpu=name --format=csv,noheader
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
H=$(pwd)/.whl
P=$(pwd)/benchmark/data/s46
cd .gpu-run
export PYTHONPATH=src:.
rows=$(for f in src/liger_kernel/ops/*.py; do grep -q "n_blocks = tl.cdiv(n_cols, BLOCK_SIZE)" $f && n=$(basename $f .py) && echo test/transformers/test_$n.py; done)
echo "row-block kernels: $(echo $rows | wc -w)"
timeout $(upto 130) python3 -m pytest -q -p no:cacheprovider -n 4 $rows > $OUT/row_blocks_tests.log 2>&1
echo "row-block tests: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/row_blocks_tests.log | tail -6
timeout $(upto 90) python3 $P/plain_tier1_probe.py /tmp/up $H > $OUT/plain_tier1_probe.log 2>&1
echo "probe: $? at $((SECONDS - t0)) s"; grep "^|" $OUT/plain_tier1_probe.log
timeout $(upto 120) python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
  --providers liger liger_upstream torch_compile --bt 16384 --sizes 4096 14336 --rounds 5 --gpu-time --speed-only \
  --kernel geglu=geglu --kernel swiglu_gen=swiglu --kernel gated_sin_gen=- --csv $OUT/tier1.csv > $OUT/tier1.log 2>&1
echo "tier 1 compare: $? at $((SECONDS - t0)) s"; grep "^|\|copy" $OUT/tier1.log | head -20
timeout $(upto 100) python3 -m pytest -q -p no:cacheprovider -n 4 test/transformers/test_*_map.py test/transformers/test_*_bc.py \
  > $OUT/maps_bc_tests.log 2>&1
echo "index map and broadcast tests: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/maps_bc_tests.log | tail -6
timeout $(upto 100) python3 -m pytest -q -p no:cacheprovider -n 4 $(cat tier3_tests.txt) > $OUT/tier3_tests.log 2>&1
echo "tier 3 tests: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/tier3_tests.log | tail -6
timeout $(remaining) python3 -m pytest -q -p no:cacheprovider -n 2 test/transformers/test_fused_linear_*.py > $OUT/fl_tests.log 2>&1
echo "fused tests -n 2: $? at $((SECONDS-t0)) s"; tail -n 1 $OUT/fl_tests.log
grep -E "^FAILED" $OUT/fl_tests.log | grep -v OutOfMemory | head
