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

from benchmark.scripts.benchmark_model_configs import CPU_SEQ_LEN_SWEEP
from benchmark.scripts.benchmark_model_configs import compute_seq_len_sweep_config
from benchmark.scripts.benchmark_model_configs import get_benchmark_model_config
from benchmark.scripts.utils import SingleBenchmarkRunInput
from benchmark.scripts.utils import SingleBenchmarkRunOutput
from benchmark.scripts.utils import benchmark_csv_path
from benchmark.scripts.utils import benchmark_dtype_name
from benchmark.scripts.utils import full_pass_peak_bytes
from benchmark.scripts.utils import parse_benchmark_script_args
from benchmark.scripts.utils import run_memory_benchmark
from benchmark.scripts.utils import run_speed_and_memory_sweeps
from benchmark.scripts.utils import run_speed_benchmark
from benchmark.scripts.utils import select_providers
from benchmark.scripts.utils import setup_benchmark_device

KERNEL_NAME = "cross_entropy"
PROVIDERS = ["liger", "torch", "torch_compile"]
MAX_BT = 16384
PROBE_BT = 1024
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
    args = parse_benchmark_script_args(argv, description=__doc__)
    device = setup_benchmark_device(KERNEL_NAME, args)
    model = get_benchmark_model_config(args.model)
    providers = select_providers(KERNEL_NAME, args, PROVIDERS[:2] if args.smoke else PROVIDERS)
    csv_path = benchmark_csv_path(KERNEL_NAME, args)

    dtype = benchmark_dtype_name(model.dtype, device)
    if args.smoke:
        vocab_size, bt_values = SMOKE_VOCAB_SIZE, CPU_SEQ_LEN_SWEEP
    else:
        vocab_size = model.vocab_size
        probe_config = {"vocab_size": vocab_size, "dtype": dtype}
        probe_bytes = full_pass_peak_bytes(
            _setup_cross_entropy, SingleBenchmarkRunInput(PROBE_BT, "torch", "full", probe_config)
        )
        bt_values = compute_seq_len_sweep_config(model, probe_bytes / PROBE_BT, max_seq_len=MAX_BT)

    sweeps = [
        {
            "x_name": "BT",
            "x_label": "B * T",
            "x_values": bt_values,
            "extra_benchmark_configs": [{"model": model.name, "vocab_size": vocab_size, "dtype": dtype}],
        },
    ]
    run_speed_and_memory_sweeps(
        KERNEL_NAME, bench_speed_cross_entropy, bench_memory_cross_entropy, sweeps, providers, args.overwrite, csv_path
    )


if __name__ == "__main__":
    main()
