#!/usr/bin/env bash
# Session 27 (scratch): ncu counters of the LayerNorm backward variants at 16384 x 14336 bf16 (issue 43 item 4), then
# their times in one process.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
pip install -q --no-deps --target /tmp/up .whl/liger_kernel-0.8.5-py3-none-any.whl 2>&1 | tail -1
cd .gpu-run
export PYTHONPATH=src:.
H=$(cd ../.whl && pwd)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,launch__grid_size
for v in - B2 B2_32 D_1_8 DB_1_8 DB_1_16; do
  p=$H/var/layer_norm_gen_$v.py; [ "$v" = "-" ] && p=-
  timeout 90 /usr/local/cuda/bin/ncu --profile-from-start off --csv --metrics $M python3 $H/ln_ncu.py layer_norm_gen $p > $OUT/ncu_ln_$v.csv 2>&1
  echo "ncu $v: $? at $((SECONDS-t0)) s"
done
timeout 60 /usr/local/cuda/bin/ncu --profile-from-start off --csv --metrics $M python3 $H/ln_ncu.py rms_norm_gen - > $OUT/ncu_rms.csv 2>&1
echo "ncu rms: $? at $((SECONDS-t0)) s"
timeout 120 python3 benchmark/scripts/sweep_launch_settings.py --upstream /tmp/up --helper-dir $H \
  --kernel layer_norm_gen=layer_norm --sizes 4096 8192 14336 --no-compile \
  --variant $H/var/layer_norm_gen_B2.py $H/var/layer_norm_gen_B2_32.py $H/var/layer_norm_gen_DB_1_8.py $H/var/layer_norm_gen_DB_1_16.py > $OUT/ln_variants3.log 2>&1
echo "ln variants: $? at $((SECONDS-t0)) s"; grep "^|\|copy\|Error\|error" $OUT/ln_variants3.log | head -40
