"""Small shapes, where the host bounds a plain step: a generated kernel as written, under
``torch.compile(fullgraph=True)`` and under ``torch.compile(mode="reduce-overhead", fullgraph=True)`` (CUDA graphs),
beside eager torch of the kernel's own reference and upstream Liger's hand-written kernel.

    python benchmark/scripts/compiled_step.py --kernel geglu=geglu --kernel rms_norm_gen=rms_norm \
        --bt 2048 4096 --sizes 4096 --rounds 7 [--upstream DIR --helper-dir DIR]

Per provider and shape, one forward + backward (bf16): the wall-clock step (median of ``--rounds`` rounds, the
providers taking turns), the host's share (time to issue one step on an idle GPU, median of 50) and the GPU's share
(``gpu_step_ms``: the step queued behind a GPU-side wait, so the host is kept out). ``fullgraph=True`` makes any
graph break an error: a kernel that breaks the graph gets a row saying so instead of figures. Before timing, each
compiled step's gradients are compared with the plain step's.
"""

import argparse
import statistics
import sys
import time

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from benchmark.scripts.compare_with_upstream import UPSTREAM
from benchmark.scripts.compare_with_upstream import _first
from benchmark.scripts.compare_with_upstream import gpu_step_ms
from benchmark.scripts.compare_with_upstream import reference_entry
from benchmark.scripts.compare_with_upstream import setup
from benchmark.scripts.compare_with_upstream import upstream_from
from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import run_speed_rounds

COMPILE_MODES = {"liger_compile": "default", "liger_reduce_overhead": "reduce-overhead"}
HOST_STEPS = 50


def compiled_forward(forward, mode: str):
    """``forward`` (the plain generated step) under torch.compile with ``fullgraph=True``; the tensors it closes over
    are graph inputs, so one compilation serves every call."""
    torch._dynamo.reset()  # every kernel and shape compiles afresh, far from the recompile limit
    compiled = torch.compile(forward, mode=mode, fullgraph=True, dynamic=False)

    def step():
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # each call is a new training step, not a reuse of outputs
        return compiled()

    return step


def cudagraph_skips() -> int:
    """How many graphs inductor has declined to capture as CUDA graphs in this process (a graph that writes its
    inputs, for one)."""
    from torch._dynamo.utils import counters

    return counters["inductor"]["cudagraph_skips"]


def _root_cause(error: BaseException) -> str:
    """The innermost exception of a failed compilation, in one line (the backend's wrapper says only which backend)."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def gradients(forward, inputs) -> list[torch.Tensor]:
    """The inputs' gradients after one step, the inputs' values restored after it: a backward that writes its
    gradients into its inputs' buffers (geglu's, as upstream's does) changes them, and every provider must start
    from the same values."""
    values = [tensor.detach().clone() for tensor in inputs]
    for tensor in inputs:
        tensor.grad = None
    output = _first(forward())
    output.backward(None if output.dim() == 0 else torch.ones_like(output))
    grads = [tensor.grad.detach().float().clone() for tensor in inputs]
    with torch.no_grad():
        for tensor, value in zip(inputs, values):
            tensor.copy_(value)
    return grads


def host_step_ms(forward, inputs, steps: int = HOST_STEPS) -> float:
    """Median time the host takes to issue one forward + backward when the GPU has nothing queued."""
    output = _first(forward())
    dy = None if output.dim() == 0 else torch.randn_like(output)
    del output
    times = []
    for _ in range(steps):
        for tensor in inputs:
            tensor.grad = None
        torch.cuda.synchronize()
        start = time.perf_counter()
        _first(forward()).backward(dy)
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def host_rounds_ms(steps: dict, rounds: int) -> dict[str, float]:
    """Each provider's host time, taken in turns over ``rounds`` rounds (the median of the rounds' medians): this
    VM's host speed drifts over seconds, which would favour whichever provider ran in a fast stretch."""
    times = {provider: [] for provider in steps}
    for _ in range(rounds):
        for provider, (inputs, forward) in steps.items():
            times[provider].append(host_step_ms(forward, inputs, max(1, HOST_STEPS // rounds)))
    return {provider: statistics.median(values) for provider, values in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", help="folder with upstream liger_kernel installed")
    parser.add_argument("--helper-dir", help="folder holding upstream_liger.py")
    parser.add_argument("--kernel", action="append", required=True, help="GENERATED=UPSTREAM (UPSTREAM may be -)")
    parser.add_argument("--bt", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("compiled_step: needs a CUDA GPU; none is visible here", file=sys.stderr)
        raise SystemExit(2)
    up = upstream_from(args)
    print(
        "| kernel | BT x H | provider | step ms (median of rounds) | host ms | GPU ms | grad max diff / max |",
        flush=True,
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        reference_entry(name)  # a missing generation record is one line, before anything is measured
        for bt in args.bt:
            for size in args.sizes:
                config = {"hidden_size": size, "hidden": size, "dtype": "bfloat16", "model": "compiled"}
                steps, notes, diffs = {}, {}, {}
                for provider in ("torch", "liger", "liger_upstream"):
                    if provider == "liger_upstream" and (up is None or upstream_key not in UPSTREAM):
                        continue
                    run = SingleBenchmarkRunInput(bt, provider, "full", dict(config))
                    steps[provider] = setup(name, upstream_key, up, run)
                inputs, forward = steps["liger"]
                expected = gradients(forward, inputs)
                for provider, mode in COMPILE_MODES.items():
                    skipped = cudagraph_skips()
                    try:
                        step = compiled_forward(forward, mode)
                        got = gradients(step, inputs)
                    except Exception as error:  # a graph break under fullgraph=True, or a failed compilation
                        notes[provider] = f"does not compile: {type(error).__name__}: {_root_cause(error)}"
                        continue
                    if mode == "reduce-overhead" and cudagraph_skips() > skipped:
                        # It ran, but as plain compiled code: inductor skipped the CUDA graph (its log says why).
                        notes[provider] = "ran without a CUDA graph (inductor skipped it)"
                    # Relative to the gradient's largest value: weight gradients summed over thousands of bf16 rows
                    # are large, and a compiled graph rounds its matmuls' casts in its own order.
                    diff = max(
                        ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item() for a, b in zip(got, expected)
                    )
                    steps[provider] = (inputs, step)
                    diffs[provider] = diff
                timed = run_speed_rounds({p: (fwd, ins) for p, (ins, fwd) in steps.items()}, "full", args.rounds)
                hosts = host_rounds_ms(steps, args.rounds)
                for provider, (ins, fwd) in steps.items():
                    host = hosts[provider]
                    gpu = gpu_step_ms(fwd, ins)
                    diff = f"{diffs[provider]:.2e}" if provider in diffs else "-"
                    print(
                        f"| {name} | {bt} x {size} | {provider} | {timed[provider].y_50:.3f} | {host:.3f} | {gpu:.3f} "
                        f"| {diff} |",
                        flush=True,
                    )
                for provider, note in notes.items():
                    print(f"| {name} | {bt} x {size} | {provider} | {note} | | | |", flush=True)


if __name__ == "__main__":
    main()
