"""Session 29 (scratch): the fused linear CE's per-chunk matmuls on this card, do_bench median ms and TFLOP/s
against the whole [8192,4096]x[4096,128256] product: logits, d(hidden) (cuBLAS and the cuBLASLt path of addmm with
a 1-D bias), d(weight) += (G^T as a view of [C, V], and from a contiguous [V, C]), d(weight) = (beta 0)."""

import torch
import triton

BT, H, V = 8192, 4096, 128256
torch.manual_seed(0)
x = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16)
w = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16)
dw = torch.zeros_like(w)
dx = torch.empty_like(x)
zero = torch.zeros(H, device="cuda", dtype=torch.bfloat16)


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=200)


full = bench(lambda: x @ w.t())
rate = 2 * BT * H * V / full / 1e9
print(torch.cuda.get_device_name(), f"whole logits {full:.3f} ms = {rate:.0f} TFLOP/s", flush=True)
print(
    "| C | logits | d(hidden) | d(hidden) Lt | d(weight) += | d(weight) += from [V,C] | d(weight) = | sum (default) |"
)
print("|---|---|---|---|---|---|---|---|")
for c in (640, 704, 768, 896, 1024, 2048):
    xc = x[:c]
    g = torch.randn(c, V, device="cuda", dtype=torch.bfloat16)
    gt = g.t().contiguous()
    flop = 2 * c * H * V
    t = {
        "logits": bench(lambda: xc @ w.t()),
        "dx": bench(lambda: torch.mm(g, w, out=dx[:c])),
        "dx_lt": bench(lambda: torch.addmm(zero, g, w, out=dx[:c])),
        "dw": bench(lambda: dw.addmm_(g.t(), xc)),
        "dw_nn": bench(lambda: dw.addmm_(gt, xc)),
        "dw0": bench(lambda: dw.addmm_(g.t(), xc, beta=0.0)),
    }
    cells = " | ".join(f"{v:.3f} ({flop / v / 1e9 / rate:.0%})" for v in t.values())
    total = (t["logits"] + t["dx"] + t["dw"]) * BT / c
    print(f"| {c} | {cells} | {total:.2f} ms for {BT} rows |", flush=True)
    g = gt = None  # freed before the next size allocates
    torch.cuda.empty_cache()
