#!/usr/bin/env bash
# Session 37 (scratch): generate this session's sample references into .gpu-run (run from the checkout root).
R=benchmark/data/h100_2026-12-07_s37/refs
set -u
gen() { name=$1; ref=$2; shift 2; python3 -m tools.kernelgen new $name --reference $R/$ref --repo .gpu-run --force-new "$@" > /tmp/gen_$name.log 2>&1 || { echo "FAILED $name: $(tail -1 /tmp/gen_$name.log)"; }; }
gen s37_jsd_lae jsd_lae_min.py:f
gen s37_jsd_log jsd_log.py:f
gen s37_megatron_ce megatron_ce2.py:vocab_parallel_style_ce
gen s37_reverse_kl reverse_kl.py:reverse_kl
gen s37_kd_temp kd_temp.py:DistillKL --fused-linear
gen s37_jsd_beta jsd_beta2.py:jsd_loss
gen s37_zmix zmix.py:CEPlusZ
gen s37_grpo grpo.py:grpo_token_loss
gen s37_focal focal.py:focal_loss
gen s37_gn_sub gn_sub.py:GroupNormWrapper
gen s37_qk_norm qk_norm.py:QKNorm
gen s37_gn_module gn_module2.py:GroupNorm
gen s37_star_relu star_relu.py:StarReLU
gen s37_xielu xielu.py:XIELU
gen s37_gptoss gptoss_swiglu.py:swiglu
echo generated
# after 56b275e (KTO's baseline probed at three draws) and a292b17 (token masks drawn as 0 or 1)
gen s37_kto_kl kto_kl.py:kto_loss --fused-linear
gen s37_gspo gspo.py:GSPOLoss --fused-linear
gen s37_cispo cispo.py:cispo_loss --fused-linear
gen s37_ipo ipo.py:ipo_loss
echo generated
