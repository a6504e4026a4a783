"""Speed and memory of the SwiGLU gate ``silu(a) * b``: Liger's fused kernel vs eager torch vs torch.compile.

Sweeps the token count BT at the model's intermediate size, then the intermediate size at a fixed BT.
``liger_kernel`` is imported inside ``_setup_swiglu``, not at the top: on a machine without a GPU, ``--smoke``
must set ``TRITON_INTERPRET=1`` (``setup_benchmark_device``) before Triton is first imported.
"""

import functools
import sys

from pathlib import Path

# Run as a file, neither the repo root (``benchmark``) nor ``src`` (``liger_kernel``) is importable yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.nn.functional as F

from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import SingleBenchmarkRunOutput
from benchmark.scripts.utils import run_memory_benchmark
from benchmark.scripts.utils import run_model_sweeps
from benchmark.scripts.utils import run_speed_benchmark

KERNEL_NAME = "swiglu"
PROVIDERS = ["liger", "torch", "torch_compile"]
SMOKE_INTERMEDIATE_SIZE = 64


def torch_swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.silu(a) * b


@functools.cache
def compiled_torch_swiglu():
    # One compiled function for every run: compiling per run would hit Dynamo's recompile limit mid-sweep.
    return torch.compile(torch_swiglu)


def _setup_swiglu(input: SingleBenchmarkRunInput):
    """Inputs ``a``, ``b`` of shape [BT, intermediate_size] and the provider's forward.

    The swept dimension is ``input.x``; the other comes from the extra config (``BT`` or ``intermediate_size``).
    """
    from liger_kernel.ops import LigerSiLUMulFunction
    from liger_kernel.utils import infer_device

    config = input.extra_benchmark_config
    num_tokens = config.get("BT", input.x)
    intermediate_size = config.get("intermediate_size", input.x)
    dtype = getattr(torch, config["dtype"])
    a = torch.randn(num_tokens, intermediate_size, device=infer_device(), dtype=dtype, requires_grad=True)
    b = torch.randn(num_tokens, intermediate_size, device=infer_device(), dtype=dtype, requires_grad=True)
    forwards = {
        "liger": lambda: LigerSiLUMulFunction.apply(a, b),
        "torch": lambda: torch_swiglu(a, b),
        "torch_compile": lambda: compiled_torch_swiglu()(a, b),
    }
    if input.kernel_provider not in forwards:
        raise ValueError(f"unknown provider {input.kernel_provider!r} for {KERNEL_NAME}")
    return [a, b], forwards[input.kernel_provider]


def bench_speed_swiglu(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
    input_tensors, fwd_fn = _setup_swiglu(input)
    return run_speed_benchmark(fwd_fn, input.kernel_operation_mode, input_tensors)


def bench_memory_swiglu(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
    input_tensors, fwd_fn = _setup_swiglu(input)
    return run_memory_benchmark(fwd_fn, input.kernel_operation_mode, input_tensors)


def main(argv=None) -> None:
    run_model_sweeps(
        KERNEL_NAME,
        _setup_swiglu,
        bench_speed_swiglu,
        bench_memory_swiglu,
        size_key="intermediate_size",
        size_label="intermediate size",
        smoke_size=SMOKE_INTERMEDIATE_SIZE,
        providers=PROVIDERS,
        argv=argv,
        description=__doc__,
    )


if __name__ == "__main__":
    main()
