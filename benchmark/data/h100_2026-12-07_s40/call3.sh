#!/usr/bin/env bash
# Session 40, the second check: the kernels of 9d873ce's accurate forms (expm1, ELU, erfc, log1p: libdevice's
# functions compiled), 6c527d8's sweep backward (a held-parameter LayerNorm + tanh-GELU, its model-sized rows) and
# fused linear JSD at beta = 1; then every row kernel's generated tests (their templates' printing changed). Carry
# .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s40_expm1_gate.py $T/test_s40_elu_gate.py \
  $T/test_s40_erfc_gate.py $T/test_s40_log1p_gate.py $T/test_s40_layer_norm_gelu.py $T/test_s40_jsd_beta.py \
  > $OUT/s40_new_tests.log 2>&1
echo "s40 new: $? at $((SECONDS-t0)) s"; tail -3 $OUT/s40_new_tests.log
PYTHONPATH=src:. timeout 150 python3 -m pytest -q -p no:cacheprovider $T/test_fused_linear_s40_jsd_beta.py \
  > $OUT/s40_fused_jsd.log 2>&1
echo "fused jsd: $? at $((SECONDS-t0)) s"; tail -3 $OUT/s40_fused_jsd.log
PYTHONPATH=src:. python3 - > $OUT/accuracy.log 2>&1 <<'PY'
import torch
import liger_kernel.transformers.functional as f
x = torch.tensor([1e-7, -1e-7, 1e-5, -0.3, 0.7, 3.0, 4.0, 5.0, 9.0, -2.0], device="cuda")
ones = torch.ones_like(x)
for name, ref in [("liger_s40_expm1_gate", torch.expm1), ("liger_s40_log1p_gate", lambda v: torch.log1p(v.abs()))]:
    got, want = getattr(f, name)(x, ones).double(), ref(x.double())
    print(name, "max relative error", ((got - want).abs() / want.abs()).max().item())
got = f.liger_s40_erfc_gate(torch.full_like(x, -30.0), x).double()
want = torch.special.erfc(x.double())
ok = want.abs() > 1e-30
print("liger_s40_erfc_gate max relative error", ((got - want).abs() / want.abs())[ok].max().item())
PY
cat $OUT/accuracy.log
PYTHONPATH=src:. timeout $((570-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider -n 4 \
  $(grep -L "backward_of_an_unscaled_loss\|fused_linear" $T/test_*.py | grep -v "test_s40_\|layout_utils") > $OUT/all_rows.log 2>&1
echo "all row kernels: $? at $((SECONDS-t0)) s"; tail -3 $OUT/all_rows.log
