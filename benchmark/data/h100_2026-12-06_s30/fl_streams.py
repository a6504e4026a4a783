"""Session 30 (scratch): does running a chunk's d(weight) += G^T X on a second stream beside its d(hidden) = G W
(both read only G; no buffer added) hide d(weight)'s read-modify-write of [V, H]? And does cuBLASLt's heuristic
do better on those shapes? Per-op do_bench ms, then whole steps (GPU-only ms, median of rounds, peak MB above
the inputs) beside upstream 0.8.5 and torch.compile. Run from the generated checkout, PYTHONPATH=src:."""

import importlib.util
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(here))
sys.path.insert(0, "benchmark/scripts")
from upstream_liger import load_upstream  # noqa: E402

up = load_upstream(sys.argv[1], modules=("ops",))
import compare_with_upstream as cwu  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from utils import run_memory_benchmark  # noqa: E402

from liger_kernel.ops.fused_linear_cross_entropy_gen import LigerFusedLinearCrossEntropyGenFunction  # noqa: E402

BT, H, V = 8192, 4096, 128256
ROUNDS = int(os.environ.get("ROUNDS", "5"))
torch.manual_seed(0)
print(torch.cuda.get_device_name(), flush=True)


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=200)


def per_op():
    x = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16)
    dw = torch.zeros_like(w)
    dx = torch.empty_like(x)
    full = bench(lambda: x @ w.t())
    rate = 2 * BT * H * V / full / 1e9
    print(f"whole logits {full:.3f} ms = {rate:.0f} TFLOP/s")
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    before = torch.cuda.memory_allocated()
    with torch.cuda.stream(side):
        dw.addmm_(torch.zeros(V, 128, device="cuda", dtype=torch.bfloat16), x[:128])
    torch.cuda.synchronize()
    print(f"side stream's first matmul left {(torch.cuda.memory_allocated() - before) / 2**20:.1f} MiB allocated")
    print("| C | dX | dW += | dX then dW | dX beside dW (2 streams) | saved | dX then dW, cuBLASLt | Lt beside |")
    print("|---|---|---|---|---|---|---|---|")
    for c in (512, 576, 640, 704):
        xc = x[:c]
        g = torch.randn(c, V, device="cuda", dtype=torch.bfloat16)

        def serial():
            torch.mm(g, w, out=dx[:c])
            dw.addmm_(g.t(), xc)

        def beside():
            side.wait_stream(main)
            with torch.cuda.stream(side):
                dw.addmm_(g.t(), xc)
            torch.mm(g, w, out=dx[:c])
            main.wait_stream(side)

        t_dx = bench(lambda: torch.mm(g, w, out=dx[:c]))
        t_dw = bench(lambda: dw.addmm_(g.t(), xc))
        t_serial = bench(serial)
        t_beside = bench(beside)
        torch.backends.cuda.preferred_blas_library("cublaslt")
        t_lt = bench(serial)
        t_lt_beside = bench(beside)
        torch.backends.cuda.preferred_blas_library("cublas")
        print(
            f"| {c} | {t_dx:.3f} | {t_dw:.3f} | {t_serial:.3f} | {t_beside:.3f} | {1 - t_beside / t_serial:.1%} "
            f"| {t_lt:.3f} | {t_lt_beside:.3f} |",
            flush=True,
        )
        g = None
        torch.cuda.empty_cache()


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def whole():
    h = torch.randn(BT, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(V, H, device="cuda") / H**0.5).to(torch.bfloat16).requires_grad_(True)
    t = torch.randint(0, V, (BT,), device="cuda")
    inputs = [h, w]

    def eager(h, w, t):
        return torch.nn.functional.cross_entropy((h @ w.t()).float(), t)

    compiled = torch.compile(eager)
    streams = load(os.path.join(here, "fl_ce_streams.py"), "fl_ce_streams").LigerFusedLinearCrossEntropyGenFunction
    gen = LigerFusedLinearCrossEntropyGenFunction
    args = (-100, 0.0, 0.0, "mean")

    def lt(step):
        def run():
            torch.backends.cuda.preferred_blas_library("cublaslt")
            try:
                return step()
            finally:
                torch.backends.cuda.preferred_blas_library("cublas")

        return run

    steps = {
        "upstream": lambda: up.ops.LigerFusedLinearCrossEntropyFunction.apply(h, w, t),
        "compile": lambda: compiled(h, w, t),
        "gen (640)": lambda: gen.apply(h, w, t, None, *args, None),
        "gen 2 streams (640)": lambda: streams.apply(h, w, t, None, *args, None),
        "gen 2 streams (576)": lambda: streams.apply(h, w, t, None, *args, 576),
        "gen 2 streams (704)": lambda: streams.apply(h, w, t, None, *args, 704),
        "gen cuBLASLt (640)": lt(lambda: gen.apply(h, w, t, None, *args, None)),
        "gen 2 streams cuBLASLt (640)": lt(lambda: streams.apply(h, w, t, None, *args, None)),
    }
    for step in steps.values():
        cwu._first(step()).backward()
    loss_ref = steps["gen (640)"]().item()
    loss_streams = steps["gen 2 streams (640)"]().item()
    h.grad = w.grad = None
    steps["gen (640)"]().backward()
    g_ref = (h.grad.clone(), w.grad.clone())
    h.grad = w.grad = None
    steps["gen 2 streams (640)"]().backward()
    print(
        f"2 streams vs 1: loss {loss_streams} vs {loss_ref}; grads equal: "
        f"{torch.equal(h.grad, g_ref[0])} {torch.equal(w.grad, g_ref[1])}"
    )
    h.grad = w.grad = None
    g_ref = None
    rounds = {label: [] for label in steps}
    for _ in range(ROUNDS):
        for label, step in steps.items():
            rounds[label].append(cwu.gpu_step_ms(step, inputs, reps=10))
    flops = 3 * 2 * BT * H * V
    print(f"## fused linear CE {BT} x {H} x {V}: GPU-only ms, median of {ROUNDS} rounds; peak MB above the inputs")
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


print(f"copy rate {cwu.copy_rate_tb_s():.2f} TB/s", flush=True)
if "ops" in os.environ.get("WHICH", "ops whole"):
    per_op()
    torch.cuda.empty_cache()
if "whole" in os.environ.get("WHICH", "ops whole"):
    whole()
