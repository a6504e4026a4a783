#!/usr/bin/env bash
# Session 39, call 2: the generated tests of every row kernel in .gpu-run with the degenerate-row tolerance of this
# session's template change (32x for rows of one or two columns, for eps down to 1e-6: a checkout built after 9e3b332
# writes it), s39's references first. Carry .gpu-run.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
cd .gpu-run
T=test/transformers
PYTHONPATH=src:. timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 $T/test_s39_*.py $(grep -l "32.0 if n_cols <= 2" $T/*.py) \
  > $OUT/row_tests.log 2>&1
echo "row tests: $? at $((SECONDS-t0)) s"; tail -3 $OUT/row_tests.log
