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

from benchmark.scripts.benchmark_model_configs import CPU_HIDDEN_SIZE_SWEEP
from benchmark.scripts.benchmark_model_configs import CPU_SEQ_LEN_SWEEP
from benchmark.scripts.benchmark_model_configs import compute_hidden_size_sweep_config
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

KERNEL_NAME = "rms_norm"
PROVIDERS = ["liger", "torch", "torch_compile"]
EPS = 1e-6
MAX_BT = 16384
HIDDEN_SWEEP_BT = 4096
PROBE_BT = 1024
SMOKE_HIDDEN_SIZE = 64
SMOKE_HIDDEN_SWEEP_BT = 4


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
    args = parse_benchmark_script_args(argv, description=__doc__)
    device = setup_benchmark_device(KERNEL_NAME, args)
    model = get_benchmark_model_config(args.model)
    providers = select_providers(KERNEL_NAME, args, PROVIDERS[:2] if args.smoke else PROVIDERS)
    csv_path = benchmark_csv_path(KERNEL_NAME, args)

    dtype = benchmark_dtype_name(model.dtype, device)
    if args.smoke:
        hidden_size, hidden_sweep_bt = SMOKE_HIDDEN_SIZE, SMOKE_HIDDEN_SWEEP_BT
        bt_values, hidden_values = CPU_SEQ_LEN_SWEEP, CPU_HIDDEN_SIZE_SWEEP
    else:
        hidden_size, hidden_sweep_bt = model.hidden_size, HIDDEN_SWEEP_BT
        probe_config = {"hidden_size": hidden_size, "dtype": dtype}
        probe_bytes = full_pass_peak_bytes(
            _setup_rms_norm, SingleBenchmarkRunInput(PROBE_BT, "torch", "full", probe_config)
        )
        bt_values = compute_seq_len_sweep_config(model, probe_bytes / PROBE_BT, max_seq_len=MAX_BT)
        hidden_values = compute_hidden_size_sweep_config(
            model, probe_bytes / (PROBE_BT * hidden_size), num_tokens=hidden_sweep_bt
        )

    sweeps = [
        {
            "x_name": "BT",
            "x_label": "B * T",
            "x_values": bt_values,
            "extra_benchmark_configs": [{"model": model.name, "hidden_size": hidden_size, "dtype": dtype}],
        },
        {
            "x_name": "hidden_size",
            "x_label": "hidden size",
            "x_values": hidden_values,
            "extra_benchmark_configs": [{"model": model.name, "BT": hidden_sweep_bt, "dtype": dtype}],
        },
    ]
    run_speed_and_memory_sweeps(
        KERNEL_NAME, bench_speed_rms_norm, bench_memory_rms_norm, sweeps, providers, args.overwrite, csv_path
    )


if __name__ == "__main__":
    main()
