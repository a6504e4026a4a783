"""Harness for the ``benchmark_{kernel}.py`` scripts: timing, memory, the results CSV and the command line.

This module imports torch but never Triton or ``liger_kernel`` at import time: a script run with ``--smoke`` on a
machine without a GPU must set ``TRITON_INTERPRET=1`` (``setup_benchmark_device``) before Triton is first imported.
"""

import argparse
import math
import os
import sys
import tempfile
import time

from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from benchmark.scripts.benchmark_model_configs import CPU_HIDDEN_SIZE_SWEEP
from benchmark.scripts.benchmark_model_configs import CPU_SEQ_LEN_SWEEP
from benchmark.scripts.benchmark_model_configs import DEFAULT_MODEL_CONFIG
from benchmark.scripts.benchmark_model_configs import MODEL_CONFIGS
from benchmark.scripts.benchmark_model_configs import compute_hidden_size_sweep_config
from benchmark.scripts.benchmark_model_configs import compute_seq_len_sweep_config
from benchmark.scripts.benchmark_model_configs import get_benchmark_model_config
from benchmark.scripts.memory_stats import BYTES_PER_MB
from benchmark.scripts.memory_stats import accelerator_module
from benchmark.scripts.memory_stats import measure_peak_bytes
from benchmark.scripts.memory_stats import tensor_bytes
from benchmark.scripts.results_csv import config_string
from benchmark.scripts.results_csv import experiment_key
from benchmark.scripts.results_csv import read_benchmark_rows
from benchmark.scripts.results_csv import resolve_csv_path
from benchmark.scripts.results_csv import update_benchmark_csv

QUANTILES = [0.5, 0.2, 0.8]
OPERATION_MODES = ("forward", "backward", "full")

# Without a GPU the ops run under Triton's interpreter, where timings only prove the plumbing: one warm-up call
# and at most this many timed calls keep a smoke run short.
CPU_MAX_TIMED_REPS = 2
DEFAULT_MEMORY_REPS = 10


@dataclass
class SingleBenchmarkRunInput:
    x: int | float
    kernel_provider: str
    kernel_operation_mode: str = "full"
    extra_benchmark_config: dict[str, Any] | None = None


@dataclass
class SingleBenchmarkRunOutput:
    y_20: float
    y_50: float
    y_80: float


def _primary_output(output: Any) -> torch.Tensor:
    # Losses such as (loss, z_loss) are benchmarked through their first element.
    return output[0] if isinstance(output, (tuple, list)) else output


def _upstream_grad(y: torch.Tensor) -> torch.Tensor | None:
    # A scalar (a reduced loss) backpropagates from the implicit 1.0; anything else needs an explicit dy.
    return None if y.dim() == 0 else torch.randn_like(y)


def _reset_grads(tensors: Sequence[torch.Tensor]) -> None:
    for tensor in tensors:
        tensor.grad = None


def _quantile_output(samples: Sequence[float]) -> SingleBenchmarkRunOutput:
    ordered = torch.tensor(list(samples), dtype=torch.float64)
    y_50, y_20, y_80 = torch.quantile(ordered, torch.tensor(QUANTILES, dtype=torch.float64)).tolist()
    return SingleBenchmarkRunOutput(y_20=y_20, y_50=y_50, y_80=y_80)


def _build_timed_fn(fwd_fn: Callable[[], Any], mode: str, grad_to_none: Sequence[torch.Tensor]) -> Callable[[], Any]:
    if mode == "forward":
        return fwd_fn
    if mode == "backward":
        y = _primary_output(fwd_fn())
        dy = _upstream_grad(y)

        def backward():
            # do_bench resets gradients only before its timed calls, not its warm-up ones. Accumulating there would
            # add work the timed calls never do, and breaks kernels that write gradients over their saved inputs
            # (Liger's SwiGLU): the accumulation then modifies a saved tensor in place. Setting None is ~1 us.
            _reset_grads(grad_to_none)
            y.backward(dy, retain_graph=True)

        return backward
    if mode == "full":
        dy = _upstream_grad(_primary_output(fwd_fn()))

        def forward_backward():
            _reset_grads(grad_to_none)  # see backward() above
            _primary_output(fwd_fn()).backward(dy)

        return forward_backward
    raise ValueError(f"unknown kernel_operation_mode {mode!r}; expected one of {OPERATION_MODES}")


def _wall_clock_quantiles_ms(
    fn: Callable[[], Any], grad_to_none: Sequence[torch.Tensor], rep: float
) -> SingleBenchmarkRunOutput:
    """CPU stand-in for ``triton.testing.do_bench`` (which needs a GPU): same quantiles, a handful of calls."""

    def timed_call() -> float:
        _reset_grads(grad_to_none)
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    estimate = timed_call()  # warm-up: the interpreter parses each kernel on its first launch
    reps = max(1, min(CPU_MAX_TIMED_REPS, int(rep / max(estimate, 1e-6))))
    return _quantile_output([timed_call() for _ in range(reps)])


def run_speed_benchmark(
    fwd_fn: Callable[[], Any],
    mode: str,
    input_tensors: Sequence[torch.Tensor],
    grad_to_none: Sequence[torch.Tensor] | None = None,
    rep: float = 100,
    warmup: float = 25,
) -> SingleBenchmarkRunOutput:
    """Milliseconds of ``fwd_fn`` ("forward"), of ``y.backward(dy)`` on a prebuilt ``y`` ("backward"), or of both.

    Gradients of ``grad_to_none`` (default: ``input_tensors``) are reset to None before every call, so each
    backward allocates its gradients as in training. ``rep`` and ``warmup`` are ``do_bench``'s time budgets in
    ms; on the CPU (interpreter smoke runs) one warm-up call and at most ``CPU_MAX_TIMED_REPS`` timed calls run.
    """
    grad_to_none = list(input_tensors if grad_to_none is None else grad_to_none)
    timed_fn = _build_timed_fn(fwd_fn, mode, grad_to_none)
    if accelerator_module() is None:
        return _wall_clock_quantiles_ms(timed_fn, grad_to_none, rep)
    import triton.testing

    y_50, y_20, y_80 = triton.testing.do_bench(
        timed_fn, grad_to_none=grad_to_none, quantiles=QUANTILES, rep=rep, warmup=warmup
    )
    return SingleBenchmarkRunOutput(y_20=y_20, y_50=y_50, y_80=y_80)


def run_speed_rounds(
    steps: dict[str, tuple[Callable[[], Any], Sequence[torch.Tensor]]],
    mode: str,
    rounds: int,
    per_round: dict[str, list[float]] | None = None,
) -> dict[str, SingleBenchmarkRunOutput]:
    """``run_speed_benchmark`` of each ``steps`` entry (``name: (fwd_fn, input_tensors)``) in ``rounds`` rounds,
    the entries taking turns, each round in a rotated order; per entry, the quantiles of its rounds' medians.

    Where a step is bound by the host (small shapes: a few launches around the autograd engine), the host's speed
    drifts during a run by more than the providers differ (on the H200 VM used here one provider's median ranged
    0.08-0.19 ms over a minute). Measured one after another, providers compare two moments of the host; taking
    turns, each sees the same drift. ``per_round``, if given, receives each entry's medians in round order (for
    comparisons round by round: ``paired_rounds``)."""
    medians: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            fwd_fn, inputs = steps[name]
            medians[name].append(run_speed_benchmark(fwd_fn, mode, inputs).y_50)
    if per_round is not None:
        per_round.update(medians)
    return {name: _quantile_output(values) for name, values in medians.items()}


def paired_rounds(times: list[float], baseline: list[float]) -> tuple[int, float]:
    """How many rounds ``times`` was no slower than ``baseline`` in the same round, and the median of the rounds'
    ratios: compared round by round, the host's drift between rounds cancels."""
    ratios = sorted(t / b for t, b in zip(times, baseline, strict=True))
    middle = len(ratios) // 2
    median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
    return sum(r <= 1.0 for r in ratios), median


def _produced_bytes(fwd_fn: Callable[[], Any], mode: str, input_tensors: Sequence[torch.Tensor] | None) -> float:
    """CPU measurement: bytes of the outputs (forward) and/or of the input gradients written (backward)."""
    if input_tensors is None and mode != "forward":
        return math.nan  # the gradients cannot be found without knowing the inputs
    output = fwd_fn()
    produced = tensor_bytes(output) if mode in ("forward", "full") else 0
    if mode in ("backward", "full"):
        _reset_grads(input_tensors)
        y = _primary_output(output)
        y.backward(_upstream_grad(y))
        produced += sum(tensor_bytes(tensor.grad) for tensor in input_tensors)
    return float(produced)


def run_memory_benchmark(
    fwd_fn: Callable[[], Any],
    mode: str,
    input_tensors: Sequence[torch.Tensor] | None = None,
    reps: int = DEFAULT_MEMORY_REPS,
) -> SingleBenchmarkRunOutput:
    """Peak MB allocated by the op above what was allocated before it, as quantiles over ``reps`` runs.

    "forward" measures ``fwd_fn()``; "backward" builds the output first (outside the measurement) and measures
    ``y.backward(dy)``; "full" measures both. Gradients of ``input_tensors`` are reset before every run.

    CPU: there is no allocator statistic, so the result is the MB of tensors the op produced (outputs for
    forward, the gradients of ``input_tensors`` for backward, both for full; NaN for backward/full when
    ``input_tensors`` is not given). It is deterministic, so one run is made.
    """
    if mode not in OPERATION_MODES:
        raise ValueError(f"unknown kernel_operation_mode {mode!r}; expected one of {OPERATION_MODES}")
    inputs = list(input_tensors or [])
    if accelerator_module() is None:
        return _quantile_output([_produced_bytes(fwd_fn, mode, input_tensors) / BYTES_PER_MB])

    full_dy = _upstream_grad(_primary_output(fwd_fn())) if mode == "full" else None
    samples = []
    for _ in range(reps):
        _reset_grads(inputs)
        if mode == "forward":
            op = fwd_fn
        elif mode == "backward":
            y = _primary_output(fwd_fn())
            dy = _upstream_grad(y)
            op = lambda: y.backward(dy)
        else:
            op = lambda: _primary_output(fwd_fn()).backward(full_dy)
        samples.append(measure_peak_bytes(op) / BYTES_PER_MB)
        y = dy = op = None  # free this run's graph before the next baseline is taken
    return _quantile_output(samples)


def full_pass_peak_bytes(
    setup_fn: Callable[[SingleBenchmarkRunInput], tuple[Sequence[torch.Tensor], Callable[[], Any]]],
    run_input: SingleBenchmarkRunInput,
) -> int:
    """Peak bytes of building ``run_input``'s tensors and running one forward + backward on them.

    The inputs are built inside the measurement because at sweep sizes they are a large share of the working
    set. Divide by the probe's token count for ``compute_seq_len_sweep_config``.
    """

    def probe():
        input_tensors, fwd_fn = setup_fn(run_input)
        y = _primary_output(fwd_fn())
        y.backward(_upstream_grad(y))
        return [*input_tensors, *(tensor.grad for tensor in input_tensors)]

    return measure_peak_bytes(probe)


def gpu_name() -> str:
    backend = accelerator_module()
    return backend.get_device_name() if backend is not None else "cpu"


def liger_version() -> str:
    try:
        return metadata.version("liger_kernel")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Progress:
    """One rewritten status line on a terminal; one line per finished run when stdout is a pipe or a file."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stdout
        self.is_tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def report(self, message: str, finished_run: bool = True) -> None:
        if finished_run:
            self.done += 1
        line = f"[{self.done}/{self.total}] {message}"
        if self.is_tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.is_tty and self.total:
            self.stream.write("\n")
            self.stream.flush()


def run_benchmarks(
    bench_test_fn: Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput],
    kernel_name: str,
    metric_name: str,
    metric_unit: str,
    x_name: str,
    x_label: str,
    x_values: Sequence[int | float],
    kernel_providers: Sequence[str],
    kernel_operation_modes: Sequence[str] | None = None,
    extra_benchmark_configs: Sequence[dict[str, Any]] | None = None,
    overwrite: bool = False,
    csv_path: str | os.PathLike | None = None,
    stream=None,
) -> list[dict]:
    """Run every (config, mode, provider, x) combination and record each result as a row of the results CSV.

    The CSV is ``csv_path``, else ``$LIGER_BENCHMARK_CSV``, else ``benchmark/data/all_benchmark_data.csv``. An
    experiment already in the CSV is NOT re-run unless ``overwrite`` is set (then its row is replaced): a sweep
    that was interrupted resumes where it stopped, and a finished one is never duplicated. Each row is written as
    soon as its run finishes. A run that runs out of GPU memory is reported and skipped. Returns the rows written.
    """
    modes = list(kernel_operation_modes or ["full"])
    configs = list(extra_benchmark_configs or [{}])
    path = resolve_csv_path(csv_path)
    device_name = gpu_name()
    existing = {experiment_key(row) for row in read_benchmark_rows(path)}
    progress = _Progress(len(configs) * len(modes) * len(kernel_providers) * len(x_values), stream)
    written = []
    for config in configs:
        config_str = config_string(config)
        for mode in modes:
            for provider in kernel_providers:
                for x in x_values:
                    label = f"{kernel_name} {metric_name} {mode} {provider} {x_name}={x}"
                    row = {
                        "kernel_name": kernel_name,
                        "kernel_provider": provider,
                        "kernel_operation_mode": mode,
                        "metric_name": metric_name,
                        "metric_unit": metric_unit,
                        "x_name": x_name,
                        "x_label": x_label,
                        "x_value": x,
                        "extra_benchmark_config_str": config_str,
                        "gpu_name": device_name,
                    }
                    if not overwrite and experiment_key(row) in existing:
                        progress.report(f"{label}: already in {path.name}, kept (pass --overwrite to re-run)")
                        continue
                    run_input = SingleBenchmarkRunInput(x, provider, mode, dict(config))
                    try:
                        result = bench_test_fn(run_input)
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        progress.report(f"{label}: out of memory, skipped")
                        continue
                    row.update(
                        y_value_50=result.y_50,
                        y_value_20=result.y_20,
                        y_value_80=result.y_80,
                        timestamp=datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
                        liger_version=liger_version(),
                    )
                    update_benchmark_csv([row], path, overwrite=True)
                    written.append(row)
                    progress.report(f"{label}: {result.y_50:.4g} {metric_unit}")
    progress.close()
    return written


def run_speed_and_memory_sweeps(
    kernel_name: str,
    bench_speed_fn: Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput],
    bench_memory_fn: Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput],
    sweeps: Sequence[dict[str, Any]],
    kernel_providers: Sequence[str],
    overwrite: bool = False,
    csv_path: str | os.PathLike | None = None,
    kernel_operation_modes: Sequence[str] = OPERATION_MODES,
) -> None:
    """``run_benchmarks`` for speed (ms) and memory (MB) over each sweep.

    A sweep is a dict of ``x_name``, ``x_label``, ``x_values`` and ``extra_benchmark_configs``.
    """
    for sweep in sweeps:
        common = dict(
            kernel_name=kernel_name,
            kernel_providers=kernel_providers,
            kernel_operation_modes=list(kernel_operation_modes),
            overwrite=overwrite,
            csv_path=csv_path,
            **sweep,
        )
        run_benchmarks(bench_test_fn=bench_speed_fn, metric_name="speed", metric_unit="ms", **common)
        run_benchmarks(bench_test_fn=bench_memory_fn, metric_name="memory", metric_unit="MB", **common)


def benchmark_dtype_name(model_dtype: torch.dtype, device: str) -> str:
    """The dtype to benchmark in, by name (``"bfloat16"``): the model's, except float32 on the CPU, where
    Triton's interpreter cannot load bf16."""
    return "float32" if device == "cpu" else str(model_dtype).removeprefix("torch.")


# Shapes every kernel script sweeps: tokens up to MAX_BT, then the model dimension at a fixed token count (--bt). The
# probe run (eager torch, full mode) sizes both sweeps to the GPU's free memory.
MAX_BT = 16384
PROBE_BT = 1024
SIZE_SWEEP_BT = 4096
SMOKE_SIZE_SWEEP_BT = 4
SWEEP_MODES = ("token_length", "model_config")


def parse_benchmark_script_args(argv: Sequence[str] | None = None, description: str | None = None):
    """Command line shared by every ``benchmark_{kernel}.py`` script."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL_CONFIG.name,
        choices=sorted(MODEL_CONFIGS),
        help=f"model whose shapes are benchmarked (default: {DEFAULT_MODEL_CONFIG.name})",
    )
    parser.add_argument("--overwrite", action="store_true", help="re-run experiments already in the CSV")
    parser.add_argument(
        "--sweep-mode",
        default="token_length",
        choices=SWEEP_MODES,
        help="token_length (default): sweep BT, then the model dimension, at --model's sizes; "
        "model_config: one point per model of the registry, at --bt tokens",
    )
    parser.add_argument(
        "--bt",
        type=int,
        default=None,
        metavar="N",
        help=f"token count of the model-dimension sweeps (default: {SIZE_SWEEP_BT}; {SMOKE_SIZE_SWEEP_BT} with --smoke)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes that also run on the CPU (Triton interpreter); writes to a temporary CSV unless --csv",
    )
    parser.add_argument("--csv", default=None, metavar="PATH", help="results CSV to update")
    parser.add_argument(
        "--providers",
        default=None,
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        metavar="A,B",
        help="only these providers (comma separated), e.g. liger,torch",
    )
    return parser.parse_args(argv)


def setup_benchmark_device(kernel_name: str, args: argparse.Namespace) -> str:
    """The device to benchmark on; exits with status 2 and one line of explanation when there is none.

    Without a GPU only ``--smoke`` can run, and then Triton must interpret the kernels on the CPU: the variable
    is set here, so call this before anything imports Triton or ``liger_kernel``.
    """
    backend = accelerator_module()
    if backend is not None:
        return "cuda" if backend is torch.cuda else "xpu"
    if not args.smoke:
        print(
            f"benchmark_{kernel_name}: no GPU found; run on a CUDA device or pass --smoke for a CPU smoke run",
            file=sys.stderr,
        )
        sys.exit(2)
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return "cpu"


def select_providers(kernel_name: str, args: argparse.Namespace, available: Sequence[str]) -> list[str]:
    """``available`` narrowed by ``--providers``; an unknown name exits with status 2 and one line."""
    if not args.providers:
        return list(available)
    unknown = [name for name in args.providers if name not in available]
    if unknown:
        print(
            f"benchmark_{kernel_name}: unknown provider(s) {', '.join(unknown)}; choose from {', '.join(available)}",
            file=sys.stderr,
        )
        sys.exit(2)
    return [name for name in available if name in args.providers]


def benchmark_csv_path(kernel_name: str, args: argparse.Namespace) -> Path:
    """``--csv`` if given; a fresh temporary file for ``--smoke``; else the usual CSV resolution."""
    if args.csv:
        return Path(args.csv)
    if args.smoke:
        path = Path(tempfile.mkdtemp(prefix=f"benchmark_{kernel_name}_smoke_")) / "benchmark_data.csv"
        print(f"benchmark_{kernel_name}: smoke run, writing results to {path}")
        return path
    return resolve_csv_path()


def run_model_sweeps(
    kernel_name: str,
    setup_fn: Callable[[SingleBenchmarkRunInput], Any],
    bench_speed_fn: Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput],
    bench_memory_fn: Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput],
    *,
    size_key: str,
    size_label: str,
    smoke_size: int,
    providers: Sequence[str] = ("liger", "torch", "torch_compile"),
    sweep_size: bool = True,
    argv: Sequence[str] | None = None,
    description: str | None = None,
) -> None:
    """The ``main`` of a ``benchmark_{kernel}.py`` script: parse its arguments, then run speed and memory sweeps
    over BT at the model's ``size_key`` (``hidden_size``, ``intermediate_size`` or ``vocab_size``) and, with
    ``sweep_size``, over that size at ``--bt`` tokens; with ``--sweep-mode model_config``, over the registry's models
    at ``--bt`` tokens instead. ``setup_fn(input)`` reads ``BT`` and ``size_key`` from the extra config, falling back
    to ``input.x`` for the swept one. ``--smoke`` uses tiny shapes and no torch.compile."""
    args = parse_benchmark_script_args(argv, description=description)
    device = setup_benchmark_device(kernel_name, args)
    model = get_benchmark_model_config(args.model)
    available = [name for name in providers if not (args.smoke and name == "torch_compile")]
    providers = select_providers(kernel_name, args, available)
    csv_path = benchmark_csv_path(kernel_name, args)
    dtype = benchmark_dtype_name(model.dtype, device)

    if args.sweep_mode == "model_config":
        bt = args.bt or (SMOKE_SIZE_SWEEP_BT if args.smoke else SIZE_SWEEP_BT)
        sweep = model_config_sweep(size_key, bt, device, smoke_size if args.smoke else None)
        speed_fn, memory_fn = (by_model_index(fn, size_key) for fn in (bench_speed_fn, bench_memory_fn))
        run_speed_and_memory_sweeps(kernel_name, speed_fn, memory_fn, [sweep], providers, args.overwrite, csv_path)
        return
    if args.smoke:
        size, size_sweep_bt = smoke_size, args.bt or SMOKE_SIZE_SWEEP_BT
        bt_values, size_values = CPU_SEQ_LEN_SWEEP, CPU_HIDDEN_SIZE_SWEEP
    else:
        size, size_sweep_bt = getattr(model, size_key), args.bt or SIZE_SWEEP_BT
        probe = SingleBenchmarkRunInput(PROBE_BT, "torch", "full", {size_key: size, "dtype": dtype})
        probe_bytes = full_pass_peak_bytes(setup_fn, probe)
        bt_values = compute_seq_len_sweep_config(model, probe_bytes / PROBE_BT, max_seq_len=MAX_BT)
        if sweep_size:
            size_values = compute_hidden_size_sweep_config(
                model, probe_bytes / (PROBE_BT * size), num_tokens=size_sweep_bt
            )

    sweeps = [
        {
            "x_name": "BT",
            "x_label": "B * T",
            "x_values": bt_values,
            "extra_benchmark_configs": [{"model": model.name, size_key: size, "dtype": dtype}],
        }
    ]
    if sweep_size:
        sweeps.append(
            {
                "x_name": size_key,
                "x_label": size_label,
                "x_values": size_values,
                "extra_benchmark_configs": [{"model": model.name, "BT": size_sweep_bt, "dtype": dtype}],
            }
        )
    run_speed_and_memory_sweeps(
        kernel_name, bench_speed_fn, bench_memory_fn, sweeps, providers, args.overwrite, csv_path
    )


def model_config_sweep(size_key: str, bt: int, device: str, smoke_size: int | None = None) -> dict[str, Any]:
    """The sweep of ``--sweep-mode model_config``: one point per model of MODEL_CONFIGS (x is its index), each at
    its own ``size_key`` and dtype, all at ``bt`` tokens. A smoke run keeps ``smoke_size`` for every model: under the
    interpreter it checks the plumbing, not the models' sizes."""
    models = [
        {
            "name": model.name,
            size_key: smoke_size or getattr(model, size_key),
            "dtype": benchmark_dtype_name(model.dtype, device),
        }
        for model in MODEL_CONFIGS.values()
    ]
    return {
        "x_name": "model_config",
        "x_label": "model (index into model_configs)",
        "x_values": list(range(len(models))),
        "extra_benchmark_configs": [{"BT": bt, "model_configs": models}],
    }


def by_model_index(
    bench_fn: Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput], size_key: str
) -> Callable[[SingleBenchmarkRunInput], SingleBenchmarkRunOutput]:
    """``bench_fn`` for a model-config sweep: ``input.x`` picks the model, whose size and dtype the run takes, at the
    sweep's BT (the setup functions read both from the extra config)."""

    def bench(run_input: SingleBenchmarkRunInput) -> SingleBenchmarkRunOutput:
        config = dict(run_input.extra_benchmark_config)
        model = config.pop("model_configs")[int(run_input.x)]
        config.update({"model": model["name"], size_key: model[size_key], "dtype": model["dtype"]})
        resolved = SingleBenchmarkRunInput(
            config["BT"], run_input.kernel_provider, run_input.kernel_operation_mode, config
        )
        return bench_fn(resolved)

    return bench
