"""Headline figures for a GPU: each kernel at one training-sized point (BT=16384, bf16, full mode), next to the
device-to-device copy bandwidth measured in the same run (the memory roofline the kernels are judged by).

Rows go to the results CSV like any benchmark's; a markdown table is printed (and written with ``--markdown``).
Kernels whose benchmark script is missing (e.g. a generated kernel not generated here) are skipped with a note.
"""

import argparse
import importlib
import sys

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from benchmark.scripts.results_csv import config_string
from benchmark.scripts.results_csv import experiment_key
from benchmark.scripts.results_csv import read_benchmark_rows
from benchmark.scripts.results_csv import resolve_csv_path
from benchmark.scripts.utils import gpu_name
from benchmark.scripts.utils import run_benchmarks

# kernel -> (swept size key, sizes). Gated activations run on [BT, intermediate]; norms on [BT, hidden];
# losses on [BT, vocab].
HEADLINES = {
    "swiglu": ("intermediate_size", [4096, 14336]),
    "geglu": ("intermediate_size", [4096, 14336]),
    "rms_norm": ("hidden_size", [4096, 14336]),
    "cross_entropy": ("vocab_size", [32000, 128256]),
}
PROVIDERS = ["liger", "torch", "torch_compile"]
METRICS = (("speed", "ms"), ("memory", "MB"))


def headline_config(size_key: str, size: int, bt: int) -> dict:
    return {"model": "headline", size_key: size, "dtype": "bfloat16", "BT": bt}


def headline_figures(
    csv_path, kernel: str, size_key: str, sizes: list[int], bt: int, device_name: str
) -> dict[tuple[int, str], dict[str, float]]:
    """``(size, provider) -> {metric: median}`` of ``kernel``'s headline experiments, read from the results CSV.

    Read back from the table rather than taken from ``run_benchmarks`` (which returns only the rows it ran), so
    experiments kept from an earlier run (no ``--overwrite``) fill the table as well as freshly measured ones.
    """
    wanted = {}
    for size in sizes:
        config_str = config_string(headline_config(size_key, size, bt))
        for metric, _ in METRICS:
            for provider in PROVIDERS:
                key = experiment_key(
                    {
                        "kernel_name": kernel,
                        "kernel_provider": provider,
                        "kernel_operation_mode": "full",
                        "metric_name": metric,
                        "x_name": "BT",
                        "x_value": bt,
                        "extra_benchmark_config_str": config_str,
                        "gpu_name": device_name,
                    }
                )
                wanted[key] = (size, provider, metric)
    figures = {}
    for row in read_benchmark_rows(csv_path):
        match = wanted.get(experiment_key(row))
        if match is not None:
            size, provider, metric = match
            figures.setdefault((size, provider), {})[metric] = float(row["y_value_50"])
    return figures


def copy_bandwidth_gbps(n_bytes: int = 2 * 1024**3) -> float:
    """Device-to-device copy: bytes read plus bytes written per second, median of do_bench."""
    import triton.testing

    src = torch.empty(n_bytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), rep=200, warmup=25)
    return 2 * n_bytes / (ms * 1e-3) / 1e9


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernels", default=",".join(HEADLINES), help="comma-separated subset of the headline kernels")
    parser.add_argument("--bt", type=int, default=16384)
    parser.add_argument("--csv", default=None, help="results CSV (default: benchmark/data/all_benchmark_data.csv)")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--overwrite", action="store_true", help="replace rows of the same experiments")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmark_report: no GPU found; the headline figures need a CUDA device", file=sys.stderr)
        return 2

    bandwidth = copy_bandwidth_gbps()
    lines = [
        f"GPU: {torch.cuda.get_device_name()}; device-to-device copy: {bandwidth:.0f} GB/s (read + write)",
        "",
        "| kernel | size | provider | full ms | peak MB |",
        "| --- | --- | --- | --- | --- |",
    ]
    csv_path = resolve_csv_path(args.csv)
    for kernel in [name.strip() for name in args.kernels.split(",") if name.strip()]:
        size_key, sizes = HEADLINES[kernel]
        try:
            module = importlib.import_module(f"benchmark.scripts.benchmark_{kernel}")
        except ModuleNotFoundError:
            lines.append(f"| {kernel} | - | - | not generated here | - |")
            continue
        configs = [headline_config(size_key, size, args.bt) for size in sizes]
        for metric, unit in METRICS:
            run_benchmarks(
                bench_test_fn=getattr(module, f"bench_{metric}_{kernel}"),
                kernel_name=kernel,
                metric_name=metric,
                metric_unit=unit,
                x_name="BT",
                x_label="B * T",
                x_values=[args.bt],
                kernel_providers=PROVIDERS,
                kernel_operation_modes=["full"],
                extra_benchmark_configs=configs,
                overwrite=args.overwrite,
                csv_path=csv_path,
            )
        results = headline_figures(csv_path, kernel, size_key, sizes, args.bt, gpu_name())
        for size in sizes:
            for provider in PROVIDERS:
                figures = results.get((size, provider), {})
                speed, memory = figures.get("speed"), figures.get("memory")
                lines.append(
                    f"| {kernel} | {size_key}={size} | {provider} | "
                    f"{'-' if speed is None else f'{speed:.3f}'} | {'-' if memory is None else f'{memory:.0f}'} |"
                )
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
