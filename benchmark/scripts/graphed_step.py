"""Small shapes with the host taken out the way training at those shapes takes it out: the whole forward + backward
captured once in a CUDA graph and replayed, for a generated kernel, eager torch, torch.compile of the same reference
and upstream Liger's kernel, beside the plain (uncaptured) step.

    python benchmark/scripts/graphed_step.py --kernel geglu=geglu --kernel rms_norm_gen=rms_norm \
        --bt 4096 --sizes 4096 [--upstream DIR --helper-dir DIR]

At 4096 x 4096 a plain step of a Liger-style kernel is bound by its host time (an autograd.Function and one Triton
launch a pass cost more on the CPU than the GPU needs), while eager torch is bound by its GPU time; replaying a graph
costs the host one launch, so the replayed step is the GPU's time and the comparison is of kernels alone. Before it
is timed each captured step is checked: replayed from the same inputs it gives the gradients of a plain step (kernels
that write gradients over their saved inputs get their inputs restored before each checked run).
"""

import argparse
import sys

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import triton

from benchmark.scripts.compare_with_upstream import PROVIDERS
from benchmark.scripts.compare_with_upstream import UPSTREAM
from benchmark.scripts.compare_with_upstream import _first
from benchmark.scripts.compare_with_upstream import add_common_arguments
from benchmark.scripts.compare_with_upstream import setup
from benchmark.scripts.compare_with_upstream import upstream_from
from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import run_speed_benchmark

WARMUP_STEPS = 3  # on a side stream before capture, as torch.cuda.graph asks (lazy init, Triton compilation)


def _zero_grads(inputs) -> None:
    for tensor in inputs:
        tensor.grad = None


def capture_step(forward, inputs) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """One forward + backward captured in a CUDA graph; the gradients it writes stay in the inputs' ``.grad``."""
    output = _first(forward())
    dy = torch.ones_like(output) if output.dim() == 0 else torch.randn_like(output)
    # That step's graph would keep the inputs' AccumulateGrad nodes on the default stream, which the captured
    # backward would then wait on (cudaErrorStreamCaptureImplicit): drop it before the warm-up.
    del output
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_STEPS):
            _zero_grads(inputs)
            _first(forward()).backward(dy)
    torch.cuda.current_stream().wait_stream(side)
    _zero_grads(inputs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _first(forward()).backward(dy)
    return graph, dy


def check_replay(graph, forward, inputs, originals, dy) -> float:
    """Largest difference between a replay's gradients and a plain step's, both from ``originals`` and the same
    upstream gradient (a kernel may write its input gradient over ``dy``'s buffer, as rms_norm does)."""
    dy_original = dy.detach().clone()
    for tensor, original in zip(inputs, originals):
        tensor.data.copy_(original)
    graph.replay()
    replayed = [tensor.grad.detach().clone() for tensor in inputs]
    dy.copy_(dy_original)
    for tensor, original in zip(inputs, originals):
        tensor.data.copy_(original)
    saved = [tensor.grad for tensor in inputs]  # the graph's own gradient buffers: keep them for later replays
    _zero_grads(inputs)
    _first(forward()).backward(dy)
    plain = [tensor.grad.detach().clone() for tensor in inputs]
    for tensor, grad in zip(inputs, saved):
        tensor.grad = grad
    return max((a.float() - b.float()).abs().max().item() for a, b in zip(replayed, plain))


def graphed_ms(graph) -> float:
    return triton.testing.do_bench(graph.replay, rep=200, return_mode="median")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser, upstream_required=False)
    parser.add_argument("--providers", nargs="+", default=PROVIDERS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("graphed_step: needs a CUDA GPU (CUDA graphs); none is visible here", file=sys.stderr)
        raise SystemExit(2)
    up = upstream_from(args)
    print(
        "| kernel | BT x H | provider | plain step ms | graphed step ms | graphed vs eager graphed | replay max diff |"
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        providers = [
            p for p in args.providers if p != "liger_upstream" or (up is not None and upstream_key in UPSTREAM)
        ]
        for size in args.sizes:
            config = {"hidden_size": size, "hidden": size, "dtype": "bfloat16", "model": "graphed"}
            rows = {}
            for provider in providers:
                run = SingleBenchmarkRunInput(args.bt, provider, "full", dict(config))
                inputs, forward = setup(name, upstream_key, up, run)
                plain = run_speed_benchmark(forward, "full", inputs, rep=200).y_50
                originals = [tensor.detach().clone() for tensor in inputs]
                graph, dy = capture_step(forward, inputs)
                diff = check_replay(graph, forward, inputs, originals, dy)
                rows[provider] = (plain, graphed_ms(graph), diff)
                del graph
            eager = rows.get("torch", (None, None, None))[1]
            for provider, (plain, graphed, diff) in rows.items():
                ratio = f"{eager / graphed:.2f}x" if eager else "-"
                print(
                    f"| {name} | {args.bt} x {size} | {provider} | {plain:.3f} | {graphed:.3f} | {ratio} | {diff:.2e} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
