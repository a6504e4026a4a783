"""Speed and memory of RMSNorm: Liger's fused kernel vs a Llama-style eager torch RMSNorm vs torch.compile of it.

Sweeps the token count BT at the model's hidden size, then the hidden size at a fixed BT.
``liger_kernel`` is imported inside ``_setup_rms_norm``, not at the top: on a machine without a GPU, ``--smoke``
must set ``TRITON_INTERPRET=1`` (``setup_benchmark_device``) before Triton is first imported.
"""

import functools
import sys

from pathlib import Path

# Run as a file, neither the repo root (``benchmark``) nor ``src`` (``liger_kernel``) is importable yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import SingleBenchmarkRunOutput
from benchmark.scripts.utils import run_memory_benchmark
from benchmark.scripts.utils import run_model_sweeps
from benchmark.scripts.utils import run_speed_benchmark

KERNEL_NAME = "rms_norm"
PROVIDERS = ["liger", "torch", "torch_compile"]
EPS = 1e-6
SMOKE_HIDDEN_SIZE = 64


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Llama's RMSNorm: normalize in fp32, cast back to the input dtype, then scale by the weight."""
    input_dtype = x.dtype
    x32 = x.to(torch.float32)
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(input_dtype)


@functools.cache
def compiled_torch_rms_norm():
    # One compiled function for every run: compiling a module per run would hit Dynamo's recompile limit.
    return torch.compile(torch_rms_norm)


def _setup_rms_norm(input: SingleBenchmarkRunInput):
    """Input ``x`` of shape [BT, hidden_size], the provider's weight, and its forward.

    The swept dimension is ``input.x``; the other comes from the extra config (``BT`` or ``hidden_size``).
    """
    from liger_kernel.transformers import LigerRMSNorm
    from liger_kernel.utils import infer_device

    config = input.extra_benchmark_config
    num_tokens = config.get("BT", input.x)
    hidden_size = config.get("hidden_size", input.x)
    dtype = getattr(torch, config["dtype"])
    device = infer_device()
    x = torch.randn(num_tokens, hidden_size, device=device, dtype=dtype, requires_grad=True)
    if input.kernel_provider == "liger":
        norm = LigerRMSNorm(hidden_size, eps=EPS).to(device=device, dtype=dtype)
        return [x, norm.weight], lambda: norm(x)
    weight = torch.ones(hidden_size, device=device, dtype=dtype, requires_grad=True)
    if input.kernel_provider == "torch":
        return [x, weight], lambda: torch_rms_norm(x, weight)
    if input.kernel_provider == "torch_compile":
        return [x, weight], lambda: compiled_torch_rms_norm()(x, weight)
    raise ValueError(f"unknown provider {input.kernel_provider!r} for {KERNEL_NAME}")


def bench_speed_rms_norm(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
    input_tensors, fwd_fn = _setup_rms_norm(input)
    return run_speed_benchmark(fwd_fn, input.kernel_operation_mode, input_tensors)


def bench_memory_rms_norm(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
    input_tensors, fwd_fn = _setup_rms_norm(input)
    return run_memory_benchmark(fwd_fn, input.kernel_operation_mode, input_tensors)


def main(argv=None) -> None:
    run_model_sweeps(
        KERNEL_NAME,
        _setup_rms_norm,
        bench_speed_rms_norm,
        bench_memory_rms_norm,
        size_key="hidden_size",
        size_label="hidden size",
        smoke_size=SMOKE_HIDDEN_SIZE,
        providers=PROVIDERS,
        argv=argv,
        description=__doc__,
    )


if __name__ == "__main__":
    main()
