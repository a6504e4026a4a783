#!/usr/bin/env bash
# Session 29 (scratch), call 2: issue 43 item 3 across every generated kernel with an upstream counterpart, generated
# against upstream 0.8.5 only (GPU-only ms, 5 rounds, speed only): element-wise and row kernels at 16384 x {4096,
# 8192, 14336}, then the losses at 8192 x {32000, 128256}.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | grep -v WARN
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
run() {  # tag timeout args...
  local tag=$1 limit=$2; shift 2
  timeout $limit python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream --rounds 5 --gpu-time --speed-only "$@" --csv $OUT/$tag.csv > $OUT/$tag.log 2>&1
  echo "$tag: $? at $((SECONDS-t0)) s"; grep "^| [a-z]\|copy\|Error" $OUT/$tag.log | head -80
}
run elementwise ${T1:-170} --bt 16384 --kernel geglu=geglu --kernel geglu_gen=geglu --kernel swiglu_gen=swiglu \
  --kernel dyt_gen=dyt
run rms ${T2:-200} --bt 16384 --kernel rms_norm_gen=rms_norm --kernel gemma_rms_norm_gen=gemma_rms_norm \
  --kernel fused_add_rms_norm_gen=fused_add_rms_norm --kernel poly_norm_gen=poly_norm
run rows ${T3:-200} --bt 16384 --kernel layer_norm_gen=layer_norm --kernel softmax_gen=softmax \
  --kernel group_norm_grp=group_norm
