#!/usr/bin/env bash
# Session 40, the third check: after the fixes call3 called for (a distributed expm1 written out in the
# forward; the fused JSD's zero-gradient check in bf16): the expm1 / ELU / erfc / log1p kernels' tests and their
# accuracy against float64 torch on the device, the fused JSD, then call3's out-of-memory cases at one worker.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 $T/test_s40_expm1_gate.py $T/test_s40_elu_gate.py \
  $T/test_s40_erfc_gate.py $T/test_s40_log1p_gate.py > $OUT/s40_accurate_tests.log 2>&1
echo "accurate forms: $? at $((SECONDS-t0)) s"; tail -2 $OUT/s40_accurate_tests.log
PYTHONPATH=src:. python3 - > $OUT/accuracy.log 2>&1 <<'PY'
import torch
import liger_kernel.transformers.functional as f
x = torch.tensor([1e-7, -1e-7, 1e-5, -0.3, 0.7, 3.0, 4.0, 5.0, 9.0, -2.0], device="cuda").double()
ones = torch.ones_like(x)
far = torch.full_like(x, -80.0)  # sigmoid(-80) * y is below every erfc(y) checked
cases = {
    "expm1_gate": (f.liger_s40_expm1_gate(x.float(), ones.float()), torch.expm1(x)),
    "elu_gate": (f.liger_s40_elu_gate(x.float(), ones.float()), torch.nn.functional.elu(x)),
    "log1p_gate": (f.liger_s40_log1p_gate(x.float(), ones.float()), torch.log1p(x.abs())),
    "erfc_gate": (f.liger_s40_erfc_gate(far.float(), x.float()), torch.sigmoid(far) * x + torch.special.erfc(x)),
}
for name, (got, want) in cases.items():
    seen = want.abs() > 1e-30
    print(name, "max relative error", ((got.double() - want).abs() / want.abs())[seen].max().item())
PY
cat $OUT/accuracy.log
PYTHONPATH=src:. timeout 150 python3 -m pytest -q -p no:cacheprovider $T/test_fused_linear_s40_jsd_beta.py \
  > $OUT/s40_fused_jsd.log 2>&1
echo "fused jsd: $? at $((SECONDS-t0)) s"; tail -2 $OUT/s40_fused_jsd.log
PYTHONPATH=src:. timeout $((560-SECONDS+t0)) python3 -m pytest -q -p no:cacheprovider $T/test_dpo_sigmoid.py \
  $T/test_grpo_kl.py $T/test_listwise_ranking.py $T/test_orpo_odds_ratio.py $T/test_simpo_margin.py \
  -k "128256 or 32000" > $OUT/staged_n1.log 2>&1
echo "staged at one worker: $? at $((SECONDS-t0)) s"; tail -2 $OUT/staged_n1.log
