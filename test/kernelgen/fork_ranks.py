"""pytest plugin for the suite's runs of generated tests (``run_pytest``): ``torch.multiprocessing.spawn`` starts
its ranks by fork. A generated DTensor test spawns, as upstream's do, and each spawned rank imports torch, Triton
and the kernel afresh (seconds on a 2-core machine, per test); a forked rank inherits them. What the test checks
runs unchanged in the rank. The README's run of the generated test_geglu.py keeps spawn, so it stays covered."""

import functools

import torch.multiprocessing as mp

mp.spawn = functools.partial(mp.start_processes, start_method="fork")
