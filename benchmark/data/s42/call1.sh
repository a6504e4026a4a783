#!/usr/bin/env bash
# Session 42, one call: issue 43 item 1's split schedule, products only (hybrid_products.py); the generated tests of
# session 41's references at model size (sinc's Taylor form of 235d36e and the bracketed detached sum of dbb05f3 were
# never run on a GPU); on an H200 the chunk sweep and issue 43's table (../h200_2026-12-07_s38/callAB.sh). Carry
# .gpu-run (make_gpu_checkout.py, then the gen_refs.sh of s38, s39, s40, s41, s42) and .whl. Also this session's
# references (refs_s42.py: atanh, acosh, logit, integer casts).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
(cd .gpu-run && PYTHONPATH=src:. timeout 60 python3 ../benchmark/data/s42/hybrid_products.py > $OUT/hybrid_products.log 2>&1)
echo "hybrid: $? at $((SECONDS-t0)) s"; cat $OUT/hybrid_products.log
(cd .gpu-run && PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 test/transformers/test_s41_*.py test/transformers/test_s42_*.py \
  > $OUT/s41_tests.log 2>&1)
echo "tests: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/s41_tests.log | tail -12
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (cd .gpu-run && PYTHONPATH=src:. timeout 60 python3 ../benchmark/data/h100_2026-12-07_s41/chunk_sweep.py \
    > $OUT/chunk_sweep.log 2>&1)
  echo "chunk sweep: $? at $((SECONDS-t0)) s"; cat $OUT/chunk_sweep.log
  bash benchmark/data/h200_2026-12-07_s38/callAB.sh
fi
