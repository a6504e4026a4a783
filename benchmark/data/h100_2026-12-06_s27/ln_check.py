"""Gradients of an edited LayerNorm ops module against fp32 torch at 16384 x N bf16 (and the generated module's)."""

import sys

import torch

from benchmark.scripts.sweep_launch_settings import Patched

module = __import__("liger_kernel.ops.layer_norm_gen", fromlist=["_"])
function = module.LigerLayerNormGenFunction
torch.manual_seed(0)
for cols in (4096, 9000, 14336):
    x = torch.randn(16384, cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.rand(cols, device="cuda") + 0.5).to(torch.bfloat16).requires_grad_()
    b = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(16384, cols, device="cuda", dtype=torch.bfloat16)
    xf, wf, bf = (t.detach().float().requires_grad_() for t in (x, w, b))
    torch.nn.functional.layer_norm(xf, (cols,), wf, bf, 1e-5).backward(dy.float())
    truth = [t.grad for t in (xf, wf, bf)]
    for variant in [None] + sys.argv[1:]:
        for t in (x, w, b):
            t.grad = None
        with Patched(module, variant=variant):
            function.apply(x, w, b, 1e-5).backward(dy.clone())
        errors = [float((t.grad.float() - g).abs().max() / g.abs().max()) for t, g in zip((x, w, b), truth)]
        print(
            cols, variant or "generated", "max error / max |truth| (dx, dw, db):", " ".join(f"{e:.2e}" for e in errors)
        )
