#!/usr/bin/env bash
# Session 36 (scratch), call 2: the generated tests of every loss kernel of the GPU checkout (tier 3, two-stage, fused
# linear: their test and ops templates changed this session) and of this session's sample references.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
workers=2; case "$card" in *H100*) workers=1 ;; esac
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
T=test/transformers
standalone=$(grep -l "backward_of_an_unscaled_loss_matches_reference\|_loss_and_gradient_match_reference" $T/test_*.py | grep -v "test_fused_linear_" | tr '\n' ' ')
fused=$(ls $T/test_fused_linear_*.py | tr '\n' ' ')
echo "standalone: $(echo $standalone | wc -w) files; fused: $(echo $fused | wc -w) files"
timeout 200 python3 -m pytest -q -n 4 -p no:cacheprovider $standalone > $OUT/standalone.log 2>&1
echo "standalone: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|^ERROR|passed|failed" $OUT/standalone.log | tail -15
timeout $((430-SECONDS+t0)) python3 -m pytest -q -n $workers -p no:cacheprovider $fused > $OUT/fused.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|^ERROR|passed|failed" $OUT/fused.log | tail -15
