#!/usr/bin/env bash
# Session 28 (scratch), call 2: the fused KL distillation after its loss writes the student's gradient over the chunk's
# logits and its chunk became upstream's distillation chunk (1024 rows): its generated tests on the GPU, and its time
# and peak against upstream 0.8.5 and torch.compile (chunks 1536 and 2048 for the curve).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider test/transformers/test_distill_kl.py \
  test/transformers/test_fused_linear_distill_kl.py > $OUT/distill_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -2 $OUT/distill_tests.log
WHICH=kl KL_CHUNKS="0 1536 2048" KL_BEFORE=$(cd ../.whl && pwd)/fused_linear_distill_kl_before.py timeout 300 python3 ../.whl/fl_chunks.py /tmp/up > $OUT/fl_chunks_kl.log 2>&1
echo "chunks: $? at $((SECONDS-t0)) s"; grep -v "^Backend" $OUT/fl_chunks_kl.log | tail -12
