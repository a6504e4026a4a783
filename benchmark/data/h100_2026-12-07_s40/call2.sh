#!/usr/bin/env bash
# Session 40, one call: the generated tests of this session's references (refs_s40.py: a loss after an upcast and its
# fused linear form, class weights with label smoothing, a held LayerNorm and GroupNorm), then every generated loss
# and fused form of .gpu-run (the tier-3 templates changed: fp32 losses, the dtype check, weight=None's 1-D block),
# then the row kernels with parameters (the module template's holder and parameter-name check). Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s40_*.py $T/test_fused_linear_s40_*.py \
  $T/test_fused_linear_s38_ce_and_z.py $T/test_fused_linear_gathered_weighted_nll_gen.py \
  > $OUT/s40_tests.log 2>&1
echo "s40 tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/s40_tests.log
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 $(grep -l "def test_.*_backward_of_an_unscaled_loss" $T/test_*.py | grep -v s40) \
  > $OUT/loss_tests.log 2>&1
echo "loss tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/loss_tests.log
PYTHONPATH=src:. timeout $((560-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider -n 4 \
  -k module_matches_reference $(grep -l "def test_.*_module_matches_reference" $T/test_*.py | grep -v s40) \
  > $OUT/module_tests.log 2>&1
echo "module tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/module_tests.log
