"""Session 28 (scratch): the fused linear losses' time and peak against their chunk of rows, beside upstream 0.8.5
and torch.compile, in one process. GPU-only ms (compare_with_upstream.gpu_step_ms: each step queued behind a GPU
sleep), median over rounds in which the providers take turns; peak MB above the inputs (benchmark utils).
Run from the generated checkout with PYTHONPATH=src:. and this folder on sys.path."""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, "benchmark/scripts")
from upstream_liger import load_upstream  # noqa: E402

up = load_upstream(sys.argv[1], modules=("ops", "transformers.functional", "ops.backends._triton.jsd"))
import compare_with_upstream as cwu  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from utils import run_memory_benchmark  # noqa: E402

from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction  # noqa: E402
from liger_kernel.ops.fused_linear_distill_kl import LigerFusedLinearDistillKlFunction  # noqa: E402

BT, H, V = 8192, 4096, 128256
ROUNDS = int(os.environ.get("ROUNDS", "5"))
torch.manual_seed(0)


def hidden_and_weight(grad):
    h = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    w = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16).requires_grad_(grad)
    return h, w


def ce_steps():
    h, w = hidden_and_weight(True)
    t = torch.randint(0, V, (BT,), device="cuda")
    inputs = [h, w]

    def eager(h, w, t):
        return torch.nn.functional.cross_entropy((h @ w.t()).float(), t)

    compiled = torch.compile(eager)
    steps = {
        "upstream": lambda: up.ops.LigerFusedLinearCrossEntropyFunction.apply(h, w, t),
        "compile": lambda: compiled(h, w, t),
    }
    for chunk in CE_CHUNKS:
        steps[f"gen R={chunk or 'default'}"] = lambda chunk=chunk: LigerFusedLinearCrossEntropyGenFunction.apply(
            h, w, t, None, *CE_DEFAULTS, chunk
        )
    return inputs, steps


def kl_steps():
    hs, ws = hidden_and_weight(True)
    ht, wt = hidden_and_weight(False)
    inputs = [hs, ws]
    temperature = 2.0

    def eager(hs, ws, ht, wt):
        s, t = hs @ ws.t(), ht @ wt.t()
        teacher = torch.softmax(t / temperature, dim=-1)
        student = torch.log_softmax(s / temperature, dim=-1)
        return (teacher * (teacher.log() - student)).sum(-1).mean() * temperature**2

    compiled = torch.compile(eager)
    steps = {
        "upstream": lambda: up.ops.LigerFusedLinearJSDFunction.apply(hs, ws, ht, wt, None, 0.0, -100, temperature),
        "compile": lambda: compiled(hs, ws, ht, wt),
    }
    before = os.environ.get("KL_BEFORE")
    if before:  # the fused file of an earlier template, importing the loss of this checkout
        import importlib.util

        spec = importlib.util.spec_from_file_location("fused_before", before)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        steps["before"] = lambda: module.LigerFusedLinearDistillKlFunction.apply(
            hs, ws, ht, wt, None, None, temperature, None
        )
    for chunk in KL_CHUNKS:
        steps[f"gen R={chunk or 'default'}"] = lambda chunk=chunk: LigerFusedLinearDistillKlFunction.apply(
            hs, ws, ht, wt, None, None, temperature, chunk
        )
    return inputs, steps


def table(name, flops, inputs, steps):
    for step in steps.values():  # compile and autotune outside the rounds
        cwu._first(step()).backward()
    rounds = {label: [] for label in steps}
    for _ in range(ROUNDS):
        for label, step in steps.items():
            rounds[label].append(cwu.gpu_step_ms(step, inputs, reps=10))
    print(f"## {name}: GPU-only ms, median of {ROUNDS} rounds (10 steps each); peak MB above the inputs")
    print("| provider | ms | min-max | TFLOP/s | peak MB |")
    print("|---|---|---|---|---|")
    for label, step in steps.items():
        ms = statistics.median(rounds[label])
        peak = run_memory_benchmark(step, "full", inputs, reps=3).y_50
        print(
            f"| {label} | {ms:.2f} | {min(rounds[label]):.2f}-{max(rounds[label]):.2f} | {flops / ms / 1e9:.0f} "
            f"| {peak:.0f} |",
            flush=True,
        )
        torch.cuda.empty_cache()


CE_CHUNKS = [int(v) if v != "0" else None for v in os.environ.get("CE_CHUNKS", "0 1024 2048").split()]
KL_CHUNKS = [int(v) if v != "0" else None for v in os.environ.get("KL_CHUNKS", "0 1024 1536 2048").split()]
import inspect  # noqa: E402

_ce_parameters = list(inspect.signature(LigerFusedLinearCrossEntropyGenFunction.forward).parameters.values())[5:-1]
CE_DEFAULTS = [p.default for p in _ce_parameters]
print(torch.cuda.get_device_name(), "CE defaults after bias:", [p.name for p in _ce_parameters], flush=True)


def matmul_ms():
    a = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(H, V, device="cuda", dtype=torch.bfloat16)
    return triton.testing.do_bench(lambda: a @ b, warmup=50, rep=500)


ms = matmul_ms()
print(f"matmul [{BT},{H}]x[{H},{V}] bf16: {ms:.3f} ms = {2 * BT * H * V / ms / 1e9:.0f} TFLOP/s")
print(f"copy rate {cwu.copy_rate_tb_s():.2f} TB/s", flush=True)
torch.cuda.empty_cache()
one = 2 * BT * H * V
which = os.environ.get("WHICH", "ce kl").split()
if "ce" in which:
    inputs, steps = ce_steps()
    table("fused linear cross entropy, 8192 x 4096 x 128256 (3 matmuls)", 3 * one, inputs, steps)
    del inputs, steps
    torch.cuda.empty_cache()
if "kl" in which:
    inputs, steps = kl_steps()
    table("fused linear KL distillation, frozen teacher, temperature 2 (4 matmuls)", 4 * one, inputs, steps)
