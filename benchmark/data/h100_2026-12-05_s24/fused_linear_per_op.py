"""Scratch (issue 43 item 1): where the fused linear CE step's time goes at 640-row chunks (per-op ms), whether
cuBLASLt or d(hidden) beside d(weight) on a second stream moves it, 704-row chunks, against upstream and compile."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import triton  # noqa: E402
import weight_gradient_gemm_sweep as d  # noqa: E402

from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward  # noqa: E402
from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction  # noqa: E402

BT, H, V = d.BT, d.H, d.V
SIDE = torch.cuda.Stream()


def per_op(rows):
    h = d.hidden.detach()[:rows]
    w = d.weight.detach()
    t = d.target[:rows]
    logits = h @ w.t()
    dh = torch.empty_like(h)
    dw = torch.empty_like(w)
    ce = lambda: cross_entropy_gen_forward(  # noqa: E731
        logits.clone(),
        t,
        -100,
        0.0,
        0.0,
        "mean",
        gradients=(True,),
        denominator=torch.tensor(BT, device="cuda"),
        output_dtype=torch.float32,
    )
    clone = lambda: logits.clone()  # noqa: E731
    tf = 2 * rows * H * V / 1e9
    ms = {
        "logits": triton.testing.do_bench(lambda: h @ w.t(), rep=200, return_mode="median"),
        "ce+clone": triton.testing.do_bench(ce, rep=200, return_mode="median"),
        "clone": triton.testing.do_bench(clone, rep=200, return_mode="median"),
        "dH": triton.testing.do_bench(lambda: torch.mm(logits, w, out=dh), rep=200, return_mode="median"),
        "dW+=": triton.testing.do_bench(lambda: dw.addmm_(logits.t(), h), rep=200, return_mode="median"),
    }
    print(
        f"R={rows} "
        + " | ".join(
            f"{k} {v:.3f} ms" + (f" {tf / v:.0f} TF/s" if k in ("logits", "dH", "dW+=") else "") for k, v in ms.items()
        ),
        flush=True,
    )


def step_streams(h, w, t, rows, dw_fn):
    n = h.shape[0]
    dh = torch.empty_like(h)
    dw = torch.empty_like(w)
    denom = (t != -100).sum()
    loss = torch.zeros((), dtype=torch.float32, device=h.device)
    main = torch.cuda.current_stream()
    for start in range(0, n, rows):
        r = slice(start, min(start + rows, n))
        logits = h[r] @ w.t()
        chunk_loss, g = cross_entropy_gen_forward(
            logits, t[r], -100, 0.0, 0.0, "mean", gradients=(True,), denominator=denom, output_dtype=torch.float32
        )
        loss += chunk_loss
        SIDE.wait_stream(main)
        with torch.cuda.stream(SIDE):
            torch.mm(g, w, out=dh[r])
        dw_fn(dw, g, h[r], start > 0)
        main.wait_stream(SIDE)
        del logits, g
    return loss, dh, dw


class StepStreams(d.Step):
    @staticmethod
    def forward(ctx, h, w, t, rows, dw_fn):
        loss, dh, dw = step_streams(h, w, t, rows, dw_fn)
        ctx.save_for_backward(dh, dw)
        return loss


def main():
    print(torch.cuda.get_device_name(), flush=True)
    torch.manual_seed(0)
    d.hidden = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    d.weight = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16).requires_grad_(True)
    d.target = torch.randint(0, V, (BT,), device="cuda")
    hidden, weight, target = d.hidden, d.weight, d.target
    a = hidden.detach()
    ms = triton.testing.do_bench(lambda: a @ weight.t(), rep=300, return_mode="median")
    print(f"matmul [8192,4096]x[4096,128256]: {ms:.3f} ms = {2 * BT * H * V / ms / 1e9:.0f} TFLOP/s", flush=True)
    src = torch.empty(2**28, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), rep=200, return_mode="median")
    print(f"copy rate {2 * src.numel() / ms / 1e9:.2f} TB/s", flush=True)
    for lib in ("default", "cublaslt"):
        if lib == "cublaslt":
            torch.backends.cuda.preferred_blas_library("cublaslt")
        print("blas:", torch.backends.cuda.preferred_blas_library(), flush=True)
        for rows in (640, 704, 1024):
            per_op(rows)
    torch.backends.cuda.preferred_blas_library("cublas")
    check = d.reference_gradients(hidden, weight, target)
    for round_ in range(2):
        d.measure(
            "generated (template today)",
            lambda: LigerFusedLinearCrossEntropyGenFunction.apply(hidden, weight, target),
            check,
        )
        for rows in (640, 704):
            d.measure(f"seq R={rows}", lambda rows=rows: d.Step.apply(hidden, weight, target, rows, d.cublas), check)
            d.measure(
                f"dH||dW R={rows}", lambda rows=rows: StepStreams.apply(hidden, weight, target, rows, d.cublas), check
            )
        torch.backends.cuda.preferred_blas_library("cublaslt")
        d.measure(
            "generated, cublaslt", lambda: LigerFusedLinearCrossEntropyGenFunction.apply(hidden, weight, target), check
        )
        torch.backends.cuda.preferred_blas_library("cublas")
        d.measure(
            "upstream 0.8.5",
            lambda: d.up.ops.LigerFusedLinearCrossEntropyFunction.apply(hidden, weight, target)[0],
            check,
        )
        if round_ == 0:

            def f(h, w, t):
                return torch.nn.functional.cross_entropy((h @ w.t()).float(), t)

            compiled = torch.compile(f)
        d.measure("torch.compile", lambda: compiled(hidden, weight, target), check)


main()
