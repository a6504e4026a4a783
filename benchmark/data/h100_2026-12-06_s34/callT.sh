#!/usr/bin/env bash
# Session 34 (scratch), call T: generated tests of the kernels changed since the last GPU run: clamp with tensor and
# hyper-parameter bounds (827f21c: torch's gradients at ties), HF RoPE at rank 4 (9d9de7d's shapes), GPT-J's
# x[:, :, :, ::2] and cos[:, None, :, :] RoPE (3eedf00), the two-stage losses (34a5b9b's test templates; standalone on
# 3 workers, fused in one process).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
standalone=""; fused=""
for t in $(cat $H/s34/staged_tests.txt); do case "$t" in *fused_linear*) fused="$fused $t" ;; *) standalone="$standalone $t" ;; esac; done
T=test/transformers
timeout 240 python3 -m pytest -q -n 3 -p no:cacheprovider $T/test_clamp_tensor_bounds.py $T/test_clamp_hyper_bounds.py \
  $T/test_rope_seq_first.py $T/test_gptj_rope_4d_map.py $T/test_indexed_heads_rope_map.py $standalone \
  > $OUT/standalone.log 2>&1
echo "standalone: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/standalone.log | tail -8
timeout $((590-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider $fused > $OUT/staged_fused.log 2>&1
echo "staged fused: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/staged_fused.log | tail -6
