#!/usr/bin/env bash
# Session 41, the second call: after call1 found xlogy's gradient at 0 (9c4b77a), the regenerated xlogy kernel and the
# kernels of this session's later ops (floor/round for a fake quantization, asinh/sinc/copysign/addcdiv, held
# activation modules' floats) and the built-in KL and JSD (their t * log(t) guard), then the module test of every
# generated kernel of the checkout (06b9910: a fresh module starts where a fresh reference does). Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
T=test/transformers
cd .gpu-run
PYTHONPATH=src:. timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s41_xlogy_gate.py $T/test_s41_fake_quant.py \
  $T/test_s41_new_ops.py $T/test_s41_held_activations.py $T/test_s41_kl_div.py $T/test_s41_jsd.py > $OUT/s41_call2_tests.log 2>&1
echo "tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/s41_call2_tests.log
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -k module_matches_reference \
  $(grep -l "def test_.*_module_matches_reference" $T/test_*.py) > $OUT/module_tests.log 2>&1
echo "module tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/module_tests.log
