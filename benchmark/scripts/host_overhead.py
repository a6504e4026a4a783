"""Host time per call of generated kernels at a shape where the GPU does nothing (16 x 16), beside upstream Liger's
kernel, eager torch and an empty Triton launch: what a step costs the CPU when the GPU is not the bottleneck.

    python benchmark/scripts/host_overhead.py --kernel geglu=geglu --kernel rms_norm_gen=rms_norm \
        [--upstream DIR --helper-dir DIR]

Each figure is wall-clock microseconds per call over many back-to-back calls (the GPU finishes each tiny launch
long before the host queues the next), forward alone and forward + backward. A generated kernel whose wrappers
replay their launches from C++ (``ops/native_launch.py``) gets a second row, ``liger_python_launches``: the same
kernel with its wrappers run as written. Two floor rows first: an autograd
Function that launches nothing, and one that launches an empty Triton kernel a pass (what any Triton-kernel Function
pays, whatever its wrappers do). With ``--profile`` the Python
functions that take the most host time in a forward + backward are listed (cProfile).
"""

import argparse
import cProfile
import pstats
import sys
import time

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import triton

from benchmark.scripts.compare_with_upstream import UPSTREAM
from benchmark.scripts.compare_with_upstream import _first
from benchmark.scripts.compare_with_upstream import setup
from benchmark.scripts.compare_with_upstream import upstream_from
from benchmark.scripts.utils import SingleBenchmarkRunInput


@triton.jit
def _empty_kernel(x_ptr):
    pass


class _FloorFunction(torch.autograd.Function):
    """What any autograd Function with Triton kernels pays at least: it saves its inputs, allocates its output and
    gradients and, with ``launch``, launches one empty Triton kernel in each pass (the generated kernels launch one a
    pass too)."""

    @staticmethod
    def forward(ctx, launch, a, b):
        ctx.launch = launch
        ctx.save_for_backward(a, b)
        y = torch.empty_like(a)
        if launch:
            _empty_kernel[(1,)](y)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        a, b = ctx.saved_tensors
        grad_a, grad_b = torch.empty_like(a), torch.empty_like(b)
        if ctx.launch:
            _empty_kernel[(1,)](grad_a)
        return None, grad_a, grad_b


def floor_rows(size: int) -> None:
    """The floor of a two-input element-wise Function at ``size`` x ``size`` bf16: no kernel, and one empty launch
    a pass."""
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn_like(a, requires_grad=True)
    for launch, what in ((False, "autograd.Function, no kernel"), (True, "autograd.Function, one empty launch a pass")):
        forward_only, full = steps(lambda: _FloorFunction.apply(launch, a, b), [a, b])
        threaded = per_call_us(full)
        with torch.autograd.set_multithreading_enabled(False):
            inline = per_call_us(full)
        print(f"| floor | {what} | {per_call_us(forward_only):.1f} | {threaded:.1f} | {inline:.1f} |")


def per_call_us(step, calls: int = 300) -> float:
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def steps(forward, inputs):
    output = _first(forward())
    dy = None if output.dim() == 0 else torch.ones_like(output)

    def full():
        for tensor in inputs:
            tensor.grad = None
        _first(forward()).backward(dy)

    return forward, full


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", required=True, help="GENERATED=UPSTREAM (UPSTREAM may be -)")
    parser.add_argument("--upstream", default=None)
    parser.add_argument("--helper-dir", default=None)
    parser.add_argument("--bt", type=int, default=16)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--profile", action="store_true", help="list the Python functions that take the host time")
    args = parser.parse_args(argv)
    up = upstream_from(args)
    x = torch.empty(16, device="cuda")
    print(f"empty Triton launch: {per_call_us(lambda: _empty_kernel[(1,)](x)):.1f} us", flush=True)
    print("| kernel | provider | forward us | forward + backward us | same, backward on this thread us |")
    print("|---|---|---|---|---|")
    floor_rows(args.size)
    for pair in args.kernel:
        name, upstream_key = pair.split("=")
        providers = ["liger", "torch", "torch_compile"]
        providers += ["liger_upstream"] if up is not None and upstream_key in UPSTREAM else []
        ops = __import__(f"liger_kernel.ops.{name}", fromlist=["_"])
        # Wrappers that replay their launches from C++ (native_launch.py) are also timed as written, from Python.
        replayed = {
            f"{name}_{w}": getattr(ops, f"{name}_{w}")
            for w in ("forward", "backward")
            if hasattr(getattr(ops, f"{name}_{w}", None), "plain")
        }
        providers += ["liger_python_launches"] if replayed else []
        for provider in providers:
            config = {"hidden_size": args.size, "hidden": args.size, "dtype": "bfloat16", "model": "host"}
            run = SingleBenchmarkRunInput(args.bt, provider.removesuffix("_python_launches"), "full", config)
            inputs, forward = setup(name, upstream_key, up, run)
            for wrapper_name, wrapper in replayed.items():
                setattr(ops, wrapper_name, wrapper.plain if provider == "liger_python_launches" else wrapper)
            forward_only, full = steps(forward, inputs)
            threaded = per_call_us(full)
            # Autograd runs a CUDA backward on its device thread; here on the calling thread, so that the time of
            # the engine's hand-over between threads shows, and cProfile sees the backward's Python.
            with torch.autograd.set_multithreading_enabled(False):
                inline = per_call_us(full)
                print(f"| {name} | {provider} | {per_call_us(forward_only):.1f} | {threaded:.1f} | {inline:.1f} |")
                if args.profile and provider in ("liger", "liger_upstream"):
                    profiler = cProfile.Profile()
                    profiler.enable()
                    for _ in range(200):
                        full()
                    profiler.disable()
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(14)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
