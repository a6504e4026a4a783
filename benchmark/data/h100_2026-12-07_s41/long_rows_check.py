"""Rows longer than one program holds (678a037) on the GPU: the generated vocab_softmax and scaled log-softmax of
refs_s41.py at a vocabulary's width against torch (float64 truth), fp32 and bf16, forward and backward, and their
GPU time against torch eager's (compare_with_upstream.gpu_step_ms). Run from .gpu-run with PYTHONPATH=src:."""

import torch

from benchmark.scripts.compare_with_upstream import gpu_step_ms
from liger_kernel.ops.s41_scaled_log_softmax import LigerS41ScaledLogSoftmaxFunction
from liger_kernel.ops.s41_vocab_softmax import LigerS41VocabSoftmaxFunction

print(torch.cuda.get_device_name())
torch.manual_seed(0)
for rows, cols in ((4, 128256), (3, 151936), (2048, 128256)):
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(rows, cols, device="cuda") * 3).to(dtype)
        grad = torch.randn(rows, cols, device="cuda").to(dtype)
        ours = x.clone().requires_grad_()
        y = LigerS41VocabSoftmaxFunction.apply(ours)
        y.backward(grad)
        truth = x.double().requires_grad_()
        want = torch.softmax(truth, dim=-1)
        want.backward(grad.double())
        scale = torch.tensor(1.5, device="cuda", requires_grad=True)
        ours2 = x.clone().requires_grad_()
        LigerS41ScaledLogSoftmaxFunction.apply(ours2, scale).backward(grad)
        truth2, scale2 = x.double().requires_grad_(), torch.tensor(1.5, device="cuda", dtype=torch.float64)
        scale2.requires_grad_()
        torch.log_softmax(truth2 * scale2, dim=-1).backward(grad.double())
        print(
            f"{rows} x {cols} {str(dtype)[6:]}: softmax y {(y.double() - want).abs().max().item():.2e} "
            f"dx {(ours.grad.double() - truth.grad).abs().max().item():.2e}; scaled log-softmax dx "
            f"{(ours2.grad.double() - truth2.grad).abs().max().item():.2e} dscale "
            f"{abs(scale.grad.item() - scale2.grad.item()) / abs(scale2.grad.item()):.2e} relative",
            flush=True,
        )
x = torch.randn(2048, 128256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
generated = gpu_step_ms(lambda: LigerS41VocabSoftmaxFunction.apply(x), [x])
eager = gpu_step_ms(lambda: torch.softmax(x.float(), dim=-1).to(x.dtype), [x])
print(f"2048 x 128256 bf16 softmax forward + backward, GPU ms: generated {generated:.3f}, torch eager {eager:.3f}")
