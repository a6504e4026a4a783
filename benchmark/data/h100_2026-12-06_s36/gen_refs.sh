#!/usr/bin/env bash
# Session 36 (scratch): generate this session's sample references into .gpu-run (run from the checkout root).
R=.whl/s36/refs
set -u
gen() { name=$1; ref=$2; shift 2; python3 -m tools.kernelgen new $name --reference $R/$ref --repo .gpu-run --force-new "$@" > /tmp/gen_$name.log 2>&1 || { echo "FAILED $name: $(tail -1 /tmp/gen_$name.log)"; }; }
gen s36_hinton hinton.py:HintonDistill --fused-linear
gen s36_hinton_fn hinton_function.py:hinton_function --fused-linear
gen s36_hinton_clamped hinton_clamped.py:ClampedHinton --fused-linear
gen s36_dpo_flat dpo_flat.py:dpo_flat --fused-linear
gen s36_dpo_view dpo_view_size.py:dpo_view_size --fused-linear
gen s36_simpo_flat simpo_flat.py:SimPOFlat --fused-linear
gen s36_kto_flat kto_flat.py:KTOFlat
gen s36_dpo_ne dpo_ne_method.py:masked_dpo_ne_method
gen s36_dpo_shifted dpo_shifted.py:dpo_shifted --fused-linear
gen s36_hf_pad hf_pad.py:causal_lm_loss --fused-linear
gen s36_hf_module hf_module.py:CausalLMLoss
gen s36_z_causal slice_then_pad.py:z_loss_causal
gen s36_zloss zloss.py:ce_with_z_loss --fused-linear
gen s36_wce weighted.py:WeightedCrossEntropy --fused-linear
gen s36_torch_loss weighted.py:UsesTorchLoss
gen s36_two_out two_outputs_one.py:two_outputs_one
gen dpo_simple ../../s35/refs/dpo_simple.py:dpo_simple
gen fl_dpo ../../s35/refs/fl_dpo.py:fl_dpo --fused-linear
echo generated
# after 60e8719 (flat_rows)
gen s36_flat_none noshift_red.py:causal_lm_loss
gen s36_hf_reduction hf_reduction.py:causal_lm_loss --fused-linear
