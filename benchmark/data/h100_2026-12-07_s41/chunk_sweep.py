"""Issue 43 item 1: the generated fused linear cross entropy's step at several chunk sizes on this card (bf16,
8192 x 4096 x 128256, forward + backward): GPU-only ms (compare_with_upstream.gpu_step_ms, median of 40), TFLOP/s
of the three products, and peak MiB above the inputs. Run from .gpu-run with PYTHONPATH=src:."""

import torch

from benchmark.scripts.compare_with_upstream import gpu_step_ms
from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction

BT, H, V = 8192, 4096, 128256
print(torch.cuda.get_device_name())
torch.manual_seed(0)
hidden = (torch.randn(BT, H, device="cuda") * 0.5).to(torch.bfloat16).requires_grad_()
weight = (torch.randn(V, H, device="cuda") * 0.02).to(torch.bfloat16).requires_grad_()
target = torch.randint(0, V, (BT,), device="cuda")
flop = 3 * 2 * BT * H * V
for chunk in (None, 512, 640, 704, 768, 1024):

    def step(chunk=chunk):
        return LigerFusedLinearCrossEntropyGenFunction.apply(
            hidden, weight, target, None, -100, 0.0, 0.0, "mean", chunk
        )

    ms = gpu_step_ms(step, [hidden, weight])
    hidden.grad = weight.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step().backward()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    hidden.grad = weight.grad = None
    print(f"chunk {chunk or 'rule'}: {ms:.2f} ms  {flop / ms / 1e9:.0f} TFLOP/s  peak {peak:.0f} MiB", flush=True)
