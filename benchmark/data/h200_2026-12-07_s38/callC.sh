#!/usr/bin/env bash
# Session 38, call C: the generated benchmarks in upstream's current form (a setup and a __main__ calling upstream's
# sweep and measurement builders) run on upstream's own harness in .gpu-upstream (.ci/make_upstream_checkout.py):
# snake's default token-length sweep (sized by the builders' memory probe), then its model-config sweep at --bt 2048.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-upstream/benchmark/scripts
csv=../data/all_benchmark_data.csv
before=$(wc -l < $csv)
PYTHONPATH="$PWD/../../src:$PWD/../.." timeout 300 python3 benchmark_snake.py > $OUT/bench_snake.log 2>&1
echo "snake token length: $? at $((SECONDS-t0)) s"; tail -2 $OUT/bench_snake.log
PYTHONPATH="$PWD/../../src:$PWD/../.." timeout $((570-SECONDS+t0)) python3 benchmark_snake.py --sweep-mode model_config --bt 2048 \
  > $OUT/bench_snake_models.log 2>&1
echo "snake model_config: $? at $((SECONDS-t0)) s"; tail -2 $OUT/bench_snake_models.log
echo "rows in $csv: $before -> $(wc -l < $csv)"
grep -E "^snake," $csv > $OUT/generated_rows.csv; cut -d, -f1-9 $OUT/generated_rows.csv | head -60
