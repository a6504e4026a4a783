"""Session 34 (scratch): where the fused linear cross entropy's time goes at 8192 x 4096 x 128256 bf16, per chunk size:
each product and the loss kernel timed alone (do_bench median, ms), the whole loop, and schedules that change d(hidden)'s
product (split over the classes in a bmm with fp32 output) or overlap d(weight)'s update on a second stream.
Run from the generated checkout with PYTHONPATH=src:."""

import sys

import torch
import triton

from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward

BT, H, V = 8192, 4096, 128256
torch.manual_seed(0)
h = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16)
w = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16)
t = torch.randint(0, V, (BT,), device="cuda")
den = torch.tensor(BT, device="cuda")
bench = lambda f: triton.testing.do_bench(f, warmup=20, rep=200)  # noqa: E731
tf = lambda flop, ms: flop / ms / 1e9  # noqa: E731

full = 2 * BT * H * V
print(f"full logits mm: {bench(lambda: h @ w.t()):.3f} ms")
g_full = torch.randn(BT, V, device="cuda", dtype=torch.bfloat16)
for name, f in (("full dX mm", lambda: g_full @ w), ("full dW mm", lambda: g_full.t() @ h)):
    ms = bench(f)
    print(f"{name}: {ms:.3f} ms = {tf(full, ms):.0f} TFLOP/s")
del g_full
torch.cuda.empty_cache()


def ce(logits, rows):
    return cross_entropy_gen_forward(logits, t[rows], -100, 0.0, 0.0, "mean", gradients=(True,), denominator=den,
                                     output_dtype=torch.float32)


def split_dx(g, out, splits):
    """d(hidden) of a chunk as `splits` products over slices of the classes, summed in fp32: splits x the tiles."""
    c = g.shape[0]
    part = V // splits
    gs = g[:, : part * splits].view(c, splits, part).transpose(0, 1)
    ws = w[: part * splits].view(splits, part, H)
    acc = torch.bmm(gs, ws, out_dtype=torch.float32).sum(0)
    if part * splits < V:
        acc.addmm_(g[:, part * splits :].float(), w[part * splits :].float())
    out.copy_(acc)


gw = torch.empty_like(w)
gx = torch.empty_like(h)
for c in [int(v) for v in sys.argv[1:]] or [256, 512, 640, 768, 1024]:
    rows = slice(0, c)
    logits = h[rows] @ w.t()
    g = torch.randn_like(logits) * 1e-3
    n = triton.cdiv(BT, c)
    per = {
        "logits": bench(lambda: h[rows] @ w.t()),
        "ce": bench(lambda: ce(logits.clone(), rows)) - bench(lambda: logits.clone()),
        "dX": bench(lambda: torch.mm(g, w, out=gx[rows])),
        "dX split2": bench(lambda: split_dx(g, gx[rows], 2)),
        "dX split4": bench(lambda: split_dx(g, gx[rows], 4)),
        "dW": bench(lambda: gw.addmm_(g.t(), h[rows])),
    }
    flop = 2 * c * H * V
    print(f"chunk {c} ({n} chunks): " + ", ".join(
        f"{k} {v:.3f} ms" + ("" if k == "ce" else f" ({tf(flop, v):.0f} TF/s)") for k, v in per.items()))
    print(f"   x{n}: " + ", ".join(f"{k} {v * n:.2f}" for k, v in per.items()))
    del logits, g
    torch.cuda.empty_cache()


def loop(c, dx_splits=0, overlap=False):
    side = torch.cuda.Stream()
    prev = None
    for start in range(0, BT, c):
        rows = slice(start, min(start + c, BT))
        logits = h[rows] @ w.t()
        _, g = ce(logits, rows)
        if dx_splits:
            split_dx(g, gx[rows], dx_splits)
        else:
            torch.mm(g, w, out=gx[rows])
        if overlap:
            done = torch.cuda.Event()
            done.record()
            with torch.cuda.stream(side):
                side.wait_event(done)
                gw.addmm_(g.t(), h[rows], beta=0.0 if start == 0 else 1.0)
            g.record_stream(side)
            # at most one update in flight: the next chunk's logits may run beside it, not two updates
            if prev is not None:
                torch.cuda.current_stream().wait_event(prev)
            prev = torch.cuda.Event()
            prev.record(side)
        else:
            gw.addmm_(g.t(), h[rows], beta=0.0 if start == 0 else 1.0)
        del logits, g
    if overlap:
        torch.cuda.current_stream().wait_stream(side)


for label, c, kw in [
    ("plain", 640, {}), ("plain", 768, {}), ("plain", 1024, {}), ("plain", 512, {}),
    ("dx split2", 640, {"dx_splits": 2}), ("dx split4", 640, {"dx_splits": 4}), ("dx split2", 512, {"dx_splits": 2}),
    ("overlap", 320, {"overlap": True}), ("overlap", 384, {"overlap": True}),
    ("overlap+split2", 384, {"overlap": True, "dx_splits": 2}),
]:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loop(c, **kw)
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    ms = bench(lambda: loop(c, **kw))
    print(f"loop {label} c={c}: {ms:.2f} ms, {3 * full / ms / 1e9:.0f} TFLOP/s, peak {peak:.0f} MB above h, w, dW, dX")
