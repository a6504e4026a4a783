#!/usr/bin/env bash
# Session 42, calls 3-5 on the machine call 2 left warm (the commands as run): the losses' tests again with 3
# workers (call 2's 8 ran out of the card's memory at model size), the fused linear forms' tests with 2, then with 1
# the 106 of those that ran out of memory with 2 (their ids in .gpu-run/fl_failed.txt). Carry .gpu-run.
set -u
cd .gpu-run
PYTHONPATH=src:. timeout 280 python3 -m pytest -v -p no:cacheprovider -n 3 $(cat tier3_tests.txt) > $OUT/tier3_tests_n3.log 2>&1
PYTHONPATH=src:. timeout 200 python3 -m pytest -v -p no:cacheprovider -n 2 test/transformers/test_fused_linear_*.py \
  > $OUT/fused_linear_tests.log 2>&1
PYTHONPATH=src:. timeout 250 python3 -m pytest -q -p no:cacheprovider -n 1 $(cat fl_failed.txt) > $OUT/fused_linear_tests_n1.log 2>&1
