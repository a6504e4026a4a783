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

KERNEL_NAME = "swiglu"
PROVIDERS = ["liger", "torch", "torch_compile"]
MAX_BT = 16384
HIDDEN_SWEEP_BT = 4096
PROBE_BT = 1024
SMOKE_INTERMEDIATE_SIZE = 64
SMOKE_HIDDEN_SWEEP_BT = 4


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
    args = parse_benchmark_script_args(argv, description=__doc__)
    device = setup_benchmark_device(KERNEL_NAME, args)
    model = get_benchmark_model_config(args.model)
    providers = select_providers(KERNEL_NAME, args, PROVIDERS[:2] if args.smoke else PROVIDERS)
    csv_path = benchmark_csv_path(KERNEL_NAME, args)

    dtype = benchmark_dtype_name(model.dtype, device)
    if args.smoke:
        intermediate_size, hidden_sweep_bt = SMOKE_INTERMEDIATE_SIZE, SMOKE_HIDDEN_SWEEP_BT
        bt_values, intermediate_values = CPU_SEQ_LEN_SWEEP, CPU_HIDDEN_SIZE_SWEEP
    else:
        intermediate_size, hidden_sweep_bt = model.intermediate_size, HIDDEN_SWEEP_BT
        probe_config = {"intermediate_size": intermediate_size, "dtype": dtype}
        probe_bytes = full_pass_peak_bytes(
            _setup_swiglu, SingleBenchmarkRunInput(PROBE_BT, "torch", "full", probe_config)
        )
        bt_values = compute_seq_len_sweep_config(model, probe_bytes / PROBE_BT, max_seq_len=MAX_BT)
        intermediate_values = compute_hidden_size_sweep_config(
            model, probe_bytes / (PROBE_BT * intermediate_size), num_tokens=hidden_sweep_bt
        )

    sweeps = [
        {
            "x_name": "BT",
            "x_label": "B * T",
            "x_values": bt_values,
            "extra_benchmark_configs": [{"model": model.name, "intermediate_size": intermediate_size, "dtype": dtype}],
        },
        {
            "x_name": "intermediate_size",
            "x_label": "intermediate size",
            "x_values": intermediate_values,
            "extra_benchmark_configs": [{"model": model.name, "BT": hidden_sweep_bt, "dtype": dtype}],
        },
    ]
    run_speed_and_memory_sweeps(
        KERNEL_NAME, bench_speed_swiglu, bench_memory_swiglu, sweeps, providers, args.overwrite, csv_path
    )


if __name__ == "__main__":
    main()
