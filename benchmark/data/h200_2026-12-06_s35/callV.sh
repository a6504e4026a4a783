#!/usr/bin/env bash
# Session 35 (scratch), call V: generated tests of the kernels whose templates changed after e9fff31: tier-2 kernels
# with a max or min (their tests draw tied rows; .max(dim).values's first-index gradient), the two-stage losses (int
# hyper-parameters of the sequence stage, a non-default ignore_index case), the fused linear distillation losses
# (batch mean of [B, T, H], a teacher of its own hidden size, refusals), module references with forward
# hyper-parameters, references that unpack their shape, F.normalize with p a hyper-parameter, a '... hidden' hint.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
T=test/transformers
ties=$(grep -l "_tie_extremes" $T/test_*.py | tr '\n' ' ')
standalone=""; fused=""
for t in $(cat $H/s34/staged_tests.txt); do case "$t" in *fused_linear*) fused="$fused $t" ;; *) standalone="$standalone $t" ;; esac; done
NEW="$T/test_min_max_norm.py $T/test_lp_normalize.py $T/test_bias_gelu.py $T/test_dpo_simple.py $T/test_ce_none_reshape.py"
NEW="$NEW $T/test_focal_unpack_3d.py $T/test_kl_unpack_3d.py $T/test_tempered_kl.py $T/test_scaled_silu.py $T/test_fl_dpo.py"
NEW="$NEW $T/test_fl_kl_temp.py $T/test_fl_jsd.py $T/test_distill_masked.py"
echo "tied-row kernels: $ties"
timeout 220 python3 -m pytest -q -n 3 -p no:cacheprovider $NEW $ties $standalone > $OUT/standalone.log 2>&1
echo "standalone: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/standalone.log | tail -12
FL="$T/test_fused_linear_fl_dpo.py $T/test_fused_linear_fl_kl_temp.py $T/test_fused_linear_fl_jsd.py"
FL="$FL $T/test_fused_linear_distill_masked.py $T/test_fused_linear_tempered_kl.py"
timeout $((450-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider $FL $fused > $OUT/fused.log 2>&1
echo "fused: $? at $((SECONDS-t0)) s"; grep -E "^FAILED|passed|failed" $OUT/fused.log | tail -12
