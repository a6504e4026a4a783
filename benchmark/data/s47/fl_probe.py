"""Issue 43 item 1 on this card: where the chunked fused linear cross entropy (bf16, 8192 x 4096 x 128256, forward +
backward) stands against torch.compile, and whether the loss kernel's second sweep gains from walking the row
backwards (its first blocks then are the ones the first sweep read last, likeliest still in L2).

GPU-only ms (a GPU-side wait queued before each start event, as compare_with_upstream.gpu_step_ms does), median of 20,
peak MiB above the inputs. Rounds alternate the providers. Run from .gpu-run with PYTHONPATH=src:."""

import importlib.util
import sys
import tempfile

from pathlib import Path

import torch
import torch.nn.functional as F

from liger_kernel.ops import cross_entropy_gen
from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction
from liger_kernel.ops.fused_linear_cross_entropy_gen import _chunk_rows

# Session 43's timing and peak helpers, read from its probe beside this one.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "s43"))
from schedule_probe import FLOP  # noqa: E402
from schedule_probe import H  # noqa: E402
from schedule_probe import N  # noqa: E402
from schedule_probe import V  # noqa: E402
from schedule_probe import gpu_ms  # noqa: E402
from schedule_probe import peak_mib  # noqa: E402


def reversed_sweep_module():
    """The generated loss module with its last sweep (the gradient's) walking the row from its end."""
    source = open(cross_entropy_gen.__file__).read()
    loop = "    for start in range(0, n_cols, BLOCK_SIZE):\n        col = start + tl.arange(0, BLOCK_SIZE)\n"
    at = source.rindex(loop)
    backwards = (
        "    for block in range(0, (n_cols + BLOCK_SIZE - 1) // BLOCK_SIZE):\n"
        "        start = ((n_cols + BLOCK_SIZE - 1) // BLOCK_SIZE - 1 - block) * BLOCK_SIZE\n"
        "        col = start + tl.arange(0, BLOCK_SIZE)\n"
    )
    source = source[:at] + backwards + source[at + len(loop) :]
    path = tempfile.mkdtemp() + "/cross_entropy_gen_reversed.py"
    open(path, "w").write(source)
    spec = importlib.util.spec_from_file_location("cross_entropy_gen_reversed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), flush=True)
    x = (torch.randn(N, H, device="cuda") * 0.5).to(torch.bfloat16)
    w = (torch.randn(V, H, device="cuda") * 0.02).to(torch.bfloat16)
    target = torch.randint(0, V, (N,), device="cuda")
    chunk = _chunk_rows(N, H, V)
    print(f"rule chunk: {chunk} rows", flush=True)
    backwards = reversed_sweep_module()

    print("## the loss kernel on one chunk of logits (ms a chunk)", flush=True)
    logits = (torch.randn(chunk, V, device="cuda") * 2).to(torch.bfloat16)
    rows_target = target[:chunk]
    work = torch.empty_like(logits)
    results = {}
    for label, forward in (
        ("forward sweeps", cross_entropy_gen.cross_entropy_gen_forward),
        ("second sweep backwards", backwards.cross_entropy_gen_forward),
    ):

        def step(forward=forward):
            work.copy_(logits)
            return forward(work, rows_target, denominator=N, output_dtype=torch.float32)

        copy_only = gpu_ms(lambda: work.copy_(logits))
        results[label] = tuple(t.clone() for t in step())  # the gradient is written over `work`
        print(f"{label}: {gpu_ms(step) - copy_only:.4f} ms (copy of the chunk taken out: {copy_only:.4f})", flush=True)
    (a, ga), (b, gb) = results.values()
    print(f"  same loss and gradient: {torch.equal(a, b) and torch.equal(ga, gb)}", flush=True)

    print("## the three products alone, summed over the rule's chunks and whole (ms)", flush=True)
    gx, gw = torch.empty_like(x), torch.empty_like(w)
    for rows in (chunk, N):
        buf = torch.randn(rows, V, device="cuda").to(torch.bfloat16)
        parts = [slice(s, min(s + rows, N)) for s in range(0, N, rows)]
        t = [
            gpu_ms(lambda: [torch.mm(x[r], w.t(), out=buf[: r.stop - r.start]) for r in parts]),
            gpu_ms(lambda: [torch.mm(buf[: r.stop - r.start], w, out=gx[r]) for r in parts]),
            gpu_ms(
                lambda: [
                    gw.addmm_(buf[: r.stop - r.start].t(), x[r], beta=0.0 if i == 0 else 1.0)
                    for i, r in enumerate(parts)
                ]
            ),
        ]
        print(
            f"{rows} rows: logits {t[0]:.2f}  d(hidden) {t[1]:.2f}  d(weight) {t[2]:.2f}  sum {sum(t):.2f}", flush=True
        )

    print("## whole steps, rounds alternating (ms, TFLOP/s, peak MiB)", flush=True)
    hidden = x.clone().requires_grad_()
    weight = w.clone().requires_grad_()

    def generated(chunk_size=None):
        hidden.grad = weight.grad = None
        LigerFusedLinearCrossEntropyGenFunction.apply(
            hidden, weight, target, None, -100, 0.0, 0.0, "mean", chunk_size
        ).backward()

    original = cross_entropy_gen._cross_entropy_gen_forward_kernel

    def generated_backwards():
        cross_entropy_gen._cross_entropy_gen_forward_kernel = backwards._cross_entropy_gen_forward_kernel
        try:
            generated()
        finally:
            cross_entropy_gen._cross_entropy_gen_forward_kernel = original

    compiled_loss = torch.compile(lambda h, w_, t: F.cross_entropy(h @ w_.t(), t))

    def compiled():
        hidden.grad = weight.grad = None
        compiled_loss(hidden, weight, target).backward()

    steps = {
        "generated": generated,
        "generated, second sweep backwards": generated_backwards,
        "torch.compile": compiled,
        # what more memory buys: the rule's chunk is the widest within a tenth above upstream's peak
        "generated, 1024-row chunks": lambda: generated(1024),
        "generated, 2048-row chunks": lambda: generated(2048),
    }
    times = {label: [] for label in steps}
    for _ in range(3):
        for label, step in steps.items():
            times[label].append(gpu_ms(step))
    for label, step in steps.items():
        ms = sorted(times[label])[1]
        print(
            f"{label}: {ms:.2f} ms ({', '.join(f'{t:.2f}' for t in times[label])})  {FLOP / ms / 1e9:.0f} TFLOP/s  "
            f"peak {peak_mib(step):.0f} MiB",
            flush=True,
        )


if __name__ == "__main__":
    main()
