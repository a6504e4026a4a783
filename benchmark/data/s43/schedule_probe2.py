"""Issue 43 item 1, second probe (after schedule_probe.py): the generated cross entropy kernel on one [683, V] chunk
of logits, launched whole or on row slices (fewer rows in flight, so that its second sweep of a row finds it in L2)
and at other block sizes and warp counts; then whole steps (bf16, 8192 x 4096 x 128256, forward + backward) of the
even-chunk loop with the best of those, d(weight) beside d(hidden) on a side stream, against torch.compile of
F.cross_entropy(x @ w.T, t) and today's generated function, in one process. GPU-only ms (a GPU-side wait queued
before each start event), median of 20; peak MiB above the inputs. Run from .gpu-run with PYTHONPATH=src:."""

import torch
import torch.nn.functional as F

from schedule_probe import chunks
from schedule_probe import gpu_ms
from schedule_probe import peak_mib

from liger_kernel.ops import cross_entropy_gen
from liger_kernel.ops.cross_entropy_gen import cross_entropy_gen_forward
from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction

N, H, V = 8192, 4096, 128256
FLOP = 3 * 2 * N * H * V
ROWS = 683


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), flush=True)
    x = (torch.randn(N, H, device="cuda") * 0.5).to(torch.bfloat16)
    w = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16)
    target = torch.randint(0, V, (N,), device="cuda")
    denominator = (target != -100).sum()
    settings = cross_entropy_gen._settings

    print("## the loss kernel on one chunk (ms for 12 chunks' worth: x 12)", flush=True)
    logits = (x[:ROWS] @ w.t()).contiguous()
    reference_loss, reference_grad = cross_entropy_gen_forward(
        logits.clone(), target[:ROWS], denominator=denominator, output_dtype=torch.float32
    )
    results = {}
    for block, warps in ((None, None), (16384, 32), (32768, 32), (8192, 16), (8192, 8), (4096, 8)):
        if block:
            cross_entropy_gen._settings = lambda n_cols, b=block, nw=warps: (b, nw)
        else:
            cross_entropy_gen._settings = settings
        for piece in (ROWS, 342, 228, 171, 132, 86):
            buf = logits.clone()
            slices = [slice(s, min(s + piece, ROWS)) for s in range(0, ROWS, piece)]

            def run(buf=buf, slices=slices):
                for r in slices:
                    cross_entropy_gen_forward(buf[r], target[r], denominator=denominator, output_dtype=torch.float32)

            ms = gpu_ms(run) * 12
            check = logits.clone()
            total = sum(
                cross_entropy_gen_forward(check[r], target[r], denominator=denominator, output_dtype=torch.float32)[0]
                for r in slices
            )
            err = (check.float() - reference_grad.float()).abs().max().item()
            results[(block, warps, piece)] = ms
            print(
                f"block {block or 'default'} warps {warps or 'default'} rows per launch {piece}: {ms:.3f} ms "
                f"({12 * 3 * logits.numel() * 2 / ms / 1e9:.2f} TB/s at 2 reads + 1 write); "
                f"loss diff {(total - reference_loss).abs().item():.2g}, grad diff {err:.2g}",
                flush=True,
            )
    best = min(results, key=results.get)
    print(f"best: {best} at {results[best]:.3f} ms", flush=True)
    cross_entropy_gen._settings = settings if best[0] is None else (lambda n_cols: best[:2])

    print("## whole steps (ms, TFLOP/s, peak MiB)", flush=True)
    side = torch.cuda.Stream()
    hidden = x.clone().requires_grad_()
    weight = w.clone().requires_grad_()

    def even_chunks(rows, piece, streams):
        def step():
            gx = torch.empty_like(x)
            gw = torch.empty_like(w)
            buf = torch.empty(rows, V, device="cuda", dtype=torch.bfloat16)
            loss = torch.zeros((), dtype=torch.float32, device="cuda")
            main = torch.cuda.current_stream()
            for i, r in enumerate(chunks(rows)):
                part = buf[: r.stop - r.start]
                torch.mm(x[r], w.t(), out=part)
                for s in range(0, part.shape[0], piece):
                    q = slice(s, min(s + piece, part.shape[0]))
                    chunk_loss, _ = cross_entropy_gen_forward(
                        part[q], target[r][q], denominator=denominator, output_dtype=torch.float32
                    )
                    loss += chunk_loss
                if streams:
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        gw.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)
                    torch.mm(part, w, out=gx[r])
                    main.wait_stream(side)
                else:
                    torch.mm(part, w, out=gx[r])
                    gw.addmm_(part.t(), x[r], beta=0.0 if i == 0 else 1.0)
            return loss, gx, gw

        return step

    compiled = torch.compile(lambda a, b, t: F.cross_entropy(a @ b.t(), t))

    def compile_step():
        hidden.grad = weight.grad = None
        compiled(hidden, weight, target).backward()

    def generated(chunk):
        def step():
            hidden.grad = weight.grad = None
            LigerFusedLinearCrossEntropyGenFunction.apply(
                hidden, weight, target, None, -100, 0.0, 0.0, "mean", chunk
            ).backward()

        return step

    piece = best[2]
    for round_ in range(2):
        for label, step in (
            ("torch.compile", compile_step),
            ("generated today (rule chunk)", generated(None)),
            ("generated, 683 rows", generated(683)),
            ("even 683, default loss launch", even_chunks(683, 683, False)),
            (f"even 683, loss on {piece}-row slices", even_chunks(683, piece, False)),
            (f"even 683, loss on {piece}-row slices, d(w) || d(x)", even_chunks(683, piece, True)),
        ):
            ms = gpu_ms(step)
            mib = peak_mib(step) if round_ == 0 else float("nan")
            print(f"round {round_} {label}: {ms:.2f} ms  {FLOP / ms / 1e9:.0f} TFLOP/s  peak {mib:.0f} MiB", flush=True)
    ref = compiled(hidden.detach(), weight.detach(), target)
    loss, gx, gw = even_chunks(683, piece, True)()
    print(f"loss {loss.item():.6f} vs compiled {ref.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
