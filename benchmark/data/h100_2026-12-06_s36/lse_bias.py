"""Session 36 (scratch): is the generated per-token log-prob biased in fp32 (a per-sequence sum of 1024 of them then
drifts linearly)? dpo_simple's statistic vs float64 and eager fp32's log_softmax, at 8 x 1024 x 32000; then the same
streamed log-sum-exp with libdevice's exp/log in place of tl.exp/tl.log (the approximate ex2/lg2 where compiled)."""

import torch
import triton
import triton.language as tl

from triton.language.extra import libdevice

from liger_kernel.ops.dpo_simple import dpo_simple_forward


@triton.jit
def _logp(logits_ptr, labels_ptr, out_ptr, n_cols: tl.constexpr, BLOCK: tl.constexpr, PRECISE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    logits_ptr += row * n_cols
    label = tl.load(labels_ptr + row)
    m = float("-inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        col = start + tl.arange(0, BLOCK)
        x = tl.load(logits_ptr + col, mask=col < n_cols, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, tl.max(x))
        if PRECISE:
            s = s * libdevice.exp(m - new_m) + tl.sum(libdevice.exp(x - new_m))
        else:
            s = s * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m))
        m = new_m
    picked = tl.load(logits_ptr + label).to(tl.float32)
    if PRECISE:
        out = picked - m - libdevice.log(s)
    else:
        out = picked - m - tl.log(s)
    tl.store(out_ptr + row, out)


torch.manual_seed(0)
B, T, V = 8, 1024, 32000
logits = torch.randn(B, T, V, device="cuda")
labels = torch.randint(0, V, (B, T), device="cuda")
(logp,), _ = dpo_simple_forward(logits, labels, -100)
exact = logits.double().log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
eager = logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
rows = []
for precise in (False, True):
    out = torch.empty(B * T, device="cuda")
    _logp[(B * T,)](logits, labels, out, n_cols=V, BLOCK=4096, PRECISE=precise)
    rows.append((f"streamed, {'libdevice' if precise else 'tl'} exp/log", out.view(B, T).double()))
for name, value in [("generated", logp.double()), ("eager fp32", eager.double())] + rows:
    error = value - exact
    print(
        f"{name}: mean error {error.mean().item():.3e}, max |error| {error.abs().max().item():.3e}, "
        f"per-sequence sum error max {error.sum(-1).abs().max().item():.3e}"
    )
