"""One LayerNorm (or RMSNorm) forward + backward at 16384 x 14336 bf16 under ncu (profiled range: the second step),
with an edited copy of the generated ops module swapped in (sweep_launch_settings.Patched)."""

import sys

import torch

from benchmark.scripts.sweep_launch_settings import Patched

kernel, variant = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None)
module = __import__(f"liger_kernel.ops.{kernel}", fromlist=["_"])
function = getattr(module, [n for n in dir(module) if n.endswith("Function")][0])
rows, cols = 16384, 14336
x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = (torch.rand(cols, device="cuda") + 0.5).to(torch.bfloat16).requires_grad_()
b = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
args = (x, w, b, 1e-5) if kernel.startswith("layer_norm") else (x, w, 1e-6)
with Patched(module, variant=variant):
    for step in range(2):
        if step == 1:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        y = function.apply(*args)
        y.backward(torch.randn_like(y))
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
print("done", kernel, variant)
