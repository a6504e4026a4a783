"""Session 32 (scratch): where the GPU time of the generated fused linear cross entropy goes at 8192 x 4096 x 128256
bf16 (the template's chunk), beside torch.compile's: torch.profiler, one forward + backward after warm-up, kernels
grouped by name. Run from the generated checkout, PYTHONPATH=src:."""

import torch
import torch.nn.functional as F

from torch.profiler import ProfilerActivity
from torch.profiler import profile

from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction

N, H, V = 8192, 4096, 128256
print(torch.cuda.get_device_name(), flush=True)
torch.manual_seed(0)
x = (torch.randn(N, H, device="cuda", dtype=torch.bfloat16) * 0.5).requires_grad_()
w = (torch.randn(V, H, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
y = torch.randint(0, V, (N,), device="cuda")


def generated():
    return LigerFusedLinearCrossEntropyGenFunction.apply(x, w, y)


def eager():
    return F.cross_entropy((x @ w.t()).float(), y)


compiled = torch.compile(eager)


def breakdown(label, forward):
    for _ in range(3):
        x.grad = w.grad = None
        forward().backward()
    torch.cuda.synchronize()
    x.grad = w.grad = None
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        forward().backward()
        torch.cuda.synchronize()
    rows = [(e.key, e.count, e.self_device_time_total) for e in prof.key_averages() if e.self_device_time_total > 0]
    rows.sort(key=lambda row: -row[2])
    total = sum(row[2] for row in rows)
    print(f"## {label}: {total / 1000:.2f} ms of kernels")
    print("| kernel | count | total us |")
    print("|---|---|---|")
    for name, count, us in rows[:14]:
        print(f"| {name[:100]} | {count} | {us:.0f} |")
    print(flush=True)


breakdown("generated", generated)
breakdown("torch.compile", compiled)
