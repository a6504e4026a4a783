#!/usr/bin/env bash
# Session 45, call 1 (no card was lent in session 45). Run on .gpu-run rebuilt at the commit under test
# (python3 .ci/make_gpu_checkout.py, the gen_refs.sh of s38-s42, ../s42/list_tier12.py); carry .gpu-run and .whl.
# First the generated tests of the kernels whose host code session 45 changed, bf16 included: the index maps
# (test_index_maps.GENERATED as NAME_map: Helium's RoPE with q and cos cut apart, repeat_interleave, GPT-J's and
# NeoX's half-width tables, HF GPT-J's) and the broadcast kernels (NAME_bc: their Functions keep the broadcast
# shapes before the forward now). Then ../s43/call4.sh with the seconds left (issue 43's H200 table, or on another
# card the losses' and fused linear forms' tests).
# $1: the seconds the call may take (default 585).
set -u
left=${1:-585}
t0=$SECONDS
(
  cd .gpu-run
  export PYTHONPATH=src:.
  timeout 150 python3 -m pytest -q -p no:cacheprovider -n 3 test/transformers/test_*_map.py test/transformers/test_*_bc.py \
    > $OUT/maps_bc_tests.log 2>&1
  echo "index map and broadcast tests: $? at $((SECONDS - t0)) s"; grep -E "^FAILED|passed|failed" $OUT/maps_bc_tests.log | tail -6
)
bash benchmark/data/s43/call4.sh $((left - SECONDS + t0))
