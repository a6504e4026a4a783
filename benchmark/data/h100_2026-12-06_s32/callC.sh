#!/usr/bin/env bash
# Session 32 (scratch), call C: scale_by_grad_output (one host function and a kernel of at most 1024 programs walking
# rows, in ops/utils.py) in every tier-3 loss and two-stage fused loss: their generated tests on the GPU (the
# standalone losses on 3 workers, the fused ones in one process: four workers ran the card out of memory), then the
# fused CE's kernel breakdown again (the scale kernel's launches).
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$card"
t0=$SECONDS
H=$(cd .whl && pwd)
cd .gpu-run
standalone=""; fused=""
for t in $(cat $H/s32/scale_tests.txt); do case "$t" in *fused_linear*|*distill_kl*) fused="$fused $t" ;; *) standalone="$standalone $t" ;; esac; done
fused="$fused test/transformers/test_fused_linear_cross_entropy_gen.py test/transformers/test_fused_linear_gathered_weighted_nll_gen.py test/transformers/test_fused_linear_distill_kl.py"
PYTHONPATH=src:. timeout 100 python3 -m pytest -q -n 3 -p no:cacheprovider $standalone > $OUT/scale_tests_standalone.log 2>&1
echo "standalone: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/scale_tests_standalone.log | tail -4
PYTHONPATH=src:. timeout 170 python3 -m pytest -q -p no:cacheprovider $fused > $OUT/scale_tests_fused.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/scale_tests_fused.log | tail -4
PYTHONPATH=src:. timeout $((300-SECONDS+t0)) python3 $H/s32/fl_profile.py > $OUT/fl_profile_after.log 2>&1
echo "profile: $? at $((SECONDS-t0)) s"; grep -v Warn $OUT/fl_profile_after.log | grep "generated\|torch.compile\|scale\|_cross_entropy" 
