"""Session 30 (scratch): where the GPU time of a two-stage post-training loss goes (B 8 x T 1024, the template's
chunk), beside torch.compile's: torch.profiler, one forward + backward after warm-up, kernels grouped by name
(count, total us), longest first. Run from the generated checkout, PYTHONPATH=src:."""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, "benchmark/scripts")
import compare_post_training as cpt  # noqa: E402
import compare_with_upstream as cwu  # noqa: E402
import torch  # noqa: E402

from torch.profiler import ProfilerActivity  # noqa: E402
from torch.profiler import profile  # noqa: E402

B, T, H, V = 8, 1024, 4096, 128256
print(torch.cuda.get_device_name(), flush=True)


class Run:
    def __init__(self, provider):
        self.kernel_provider = provider


def breakdown(label, forward, inputs):
    for _ in range(3):
        for tensor in inputs:
            tensor.grad = None
        cwu._first(forward()).backward()
    torch.cuda.synchronize()
    for tensor in inputs:
        tensor.grad = None
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        cwu._first(forward()).backward()
        torch.cuda.synchronize()
    rows = [(e.key, e.count, e.self_device_time_total) for e in prof.key_averages() if e.self_device_time_total > 0]
    rows.sort(key=lambda row: -row[2])
    total = sum(row[2] for row in rows)
    print(f"## {label}: {total / 1000:.2f} ms of kernels")
    print("| kernel | count | total us |")
    print("|---|---|---|")
    for name, count, us in rows[:14]:
        print(f"| {name[:90]} | {count} | {us:.0f} |")
    print(flush=True)


for name in sys.argv[1].split(","):
    inputs, forward = cpt.setup(name, "-", None, Run("liger"), B, T, H, V)
    breakdown(f"{name} generated", forward, inputs)
    inputs = forward = None
    torch.cuda.empty_cache()
    inputs, forward = cpt.setup(name, "-", None, Run("torch_compile"), B, T, H, V)
    breakdown(f"{name} torch.compile", forward, inputs)
    inputs = forward = None
    torch.cuda.empty_cache()
