#!/usr/bin/env bash
# Session 38, call D: the generated tests of losses whose Function changed (a second output no longer marked
# non-differentiable: refused by one-kernel losses, differentiated by two-stage ones): the two sample losses with a
# second output, built-in cross entropy, two staged losses and their fused forms; then call C's builder benchmark.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 150 python3 -m pytest -q -p no:cacheprovider -n 2 $T/test_s38_ce_and_z.py \
  $T/test_s38_dpo_margin.py $T/test_cross_entropy_gen.py $T/test_dpo_sigmoid.py $T/test_grpo_kl.py > $OUT/loss_tests.log 2>&1
echo "loss tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/loss_tests.log
PYTHONPATH=src:. timeout 170 python3 -m pytest -q -p no:cacheprovider -n 1 $T/test_fused_linear_s38_ce_and_z.py \
  $T/test_fused_linear_s38_dpo_margin.py $T/test_fused_linear_dpo_sigmoid.py > $OUT/fused_tests.log 2>&1
echo "fused tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/fused_tests.log
cd ../.gpu-upstream/benchmark/scripts
csv=../data/all_benchmark_data.csv
before=$(wc -l < $csv)
PYTHONPATH="$PWD/../../src:$PWD/../.." timeout $((580-SECONDS+t0)) python3 benchmark_snake.py --sweep-mode model_config \
  --bt 2048 > $OUT/bench_snake_models.log 2>&1
echo "snake model_config: $? at $((SECONDS-t0)) s"; tail -2 $OUT/bench_snake_models.log
echo "rows in $csv: $before -> $(wc -l < $csv)"
grep -E "^snake," $csv > $OUT/generated_rows.csv; cut -d, -f1-9 $OUT/generated_rows.csv | head -40
