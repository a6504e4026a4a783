#!/usr/bin/env bash
# GPU benchmark batch for this session (scratch, carried in .whl): PARTS selects sections.
set -u
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
for part in ${PARTS:-before compiled}; do
case $part in
quick)
  timeout ${T_QUICK:-150} python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 16384 --sizes 14336 --rounds 3 --gpu-time \
    --kernel geglu=geglu --kernel geglu_before=geglu --kernel rms_norm_gen=rms_norm --kernel rms_norm_before=rms_norm \
    --csv $OUT/quick.csv > $OUT/quick.log 2>&1
  echo "quick: $?"; grep "^|\|copy" $OUT/quick.log | head -40 ;;
before)
  timeout ${T_BEFORE:-280} python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 16384 --sizes 4096 14336 --rounds 5 --gpu-time \
    --kernel geglu=geglu --kernel geglu_before=geglu --kernel rms_norm_gen=rms_norm --kernel rms_norm_before=rms_norm \
    --kernel layer_norm_gen=layer_norm --kernel layer_norm_before=layer_norm --csv $OUT/before.csv > $OUT/before.log 2>&1
  echo "before: $?"; grep "^|" $OUT/before.log | head -80 ;;
ce)
  timeout ${T_CE:-150} python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 8192 --sizes 128256 --rounds 5 --gpu-time \
    --kernel cross_entropy_gen=cross_entropy --kernel cross_entropy_before=cross_entropy --csv $OUT/ce.csv > $OUT/ce.log 2>&1
  echo "ce: $?"; grep "^|" $OUT/ce.log | head -30 ;;
compiled)
  timeout ${T_COMPILED:-200} python3 benchmark/scripts/compiled_step.py --upstream /tmp/up --helper-dir $H \
    --kernel geglu=geglu --kernel rms_norm_gen=rms_norm --kernel cross_entropy_gen=cross_entropy \
    --bt ${BTS:-2048 4096} --sizes 4096 --rounds ${ROUNDS:-5} > $OUT/compiled.log 2>&1
  echo "compiled: $?"; cat $OUT/compiled.log | tail -40 ;;
norms)
  timeout ${T_NORMS:-280} python3 benchmark/scripts/compare_with_upstream.py --upstream /tmp/up --helper-dir $H \
    --providers liger liger_upstream torch_compile --bt 16384 --sizes 4096 8192 14336 --rounds 5 --gpu-time \
    --kernel gemma_rms_norm_gen=gemma_rms_norm --kernel fused_add_rms_norm_gen=fused_add_rms_norm \
    --kernel l2_normalize_gen=- --csv $OUT/norms.csv > $OUT/norms.log 2>&1
  echo "norms: $?"; grep "^|" $OUT/norms.log | head -60 ;;
memory)
  timeout ${T_MEMORY:-100} python3 benchmark/scripts/gradient_buffer_memory.py --upstream /tmp/up --helper-dir $H \
    --kernel rms_norm_gen=rms_norm --kernel gemma_rms_norm_gen=gemma_rms_norm --kernel layer_norm_gen=layer_norm \
    --kernel fused_add_rms_norm_gen=fused_add_rms_norm --sizes 14336 > $OUT/memory.log 2>&1
  echo "memory: $?"; tail -30 $OUT/memory.log ;;
esac
done
