"""Speed and memory of cross entropy on [BT, vocab] logits: Liger's fused kernel vs nn.CrossEntropyLoss vs
torch.compile of it.

Sweeps the token count BT at the model's vocabulary size. ``liger_kernel`` is imported inside
``_setup_cross_entropy``, not at the top: on a machine without a GPU, ``--smoke`` must set ``TRITON_INTERPRET=1``
(``setup_benchmark_device``) before Triton is first imported.
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

KERNEL_NAME = "cross_entropy"
PROVIDERS = ["liger", "torch", "torch_compile"]
# Not a power of two, so the smoke run also covers the masked tail of the vocabulary blocks.
SMOKE_VOCAB_SIZE = 127


@functools.cache
def compiled_torch_cross_entropy():
    # One compiled module for every run: compiling per run would hit Dynamo's recompile limit mid-sweep.
    return torch.compile(torch.nn.CrossEntropyLoss())


def _setup_cross_entropy(input: SingleBenchmarkRunInput):
    """Logits [BT, vocab_size] (BT = ``input.x``), random targets, and the provider's loss forward."""
    from liger_kernel.transformers import LigerCrossEntropyLoss
    from liger_kernel.utils import infer_device

    config = input.extra_benchmark_config
    vocab_size = config["vocab_size"]
    dtype = getattr(torch, config["dtype"])
    device = infer_device()
    logits = torch.randn(input.x, vocab_size, device=device, dtype=dtype, requires_grad=True)
    target = torch.randint(vocab_size, (input.x,), device=device, dtype=torch.long)
    losses = {
        "liger": LigerCrossEntropyLoss(),
        "torch": torch.nn.CrossEntropyLoss(),
        "torch_compile": compiled_torch_cross_entropy(),
    }
    if input.kernel_provider not in losses:
        raise ValueError(f"unknown provider {input.kernel_provider!r} for {KERNEL_NAME}")
    loss_fn = losses[input.kernel_provider]
    return [logits], lambda: loss_fn(logits, target)


def bench_speed_cross_entropy(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
    input_tensors, fwd_fn = _setup_cross_entropy(input)
    return run_speed_benchmark(fwd_fn, input.kernel_operation_mode, input_tensors)


def bench_memory_cross_entropy(input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
    input_tensors, fwd_fn = _setup_cross_entropy(input)
    return run_memory_benchmark(fwd_fn, input.kernel_operation_mode, input_tensors)


def main(argv=None) -> None:
    run_model_sweeps(
        KERNEL_NAME,
        _setup_cross_entropy,
        bench_speed_cross_entropy,
        bench_memory_cross_entropy,
        size_key="vocab_size",
        size_label="vocabulary size",
        smoke_size=SMOKE_VOCAB_SIZE,
        providers=PROVIDERS,
        sweep_size=False,
        argv=argv,
        description=__doc__,
    )


if __name__ == "__main__":
    main()
