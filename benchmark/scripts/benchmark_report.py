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

from benchmark.scripts.results_csv import resolve_csv_path
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
        configs = [{"model": "headline", size_key: size, "dtype": "bfloat16", "BT": args.bt} for size in sizes]
        results = {}
        for metric, unit, fn in (
            ("speed", "ms", getattr(module, f"bench_speed_{kernel}")),
            ("memory", "MB", getattr(module, f"bench_memory_{kernel}")),
        ):
            rows = run_benchmarks(
                bench_test_fn=fn,
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
            for row in rows:
                size = eval_size(row["extra_benchmark_config_str"], size_key)
                results.setdefault((size, row["kernel_provider"]), {})[metric] = row["y_value_50"]
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


def eval_size(config_str: str, key: str) -> int:
    import json

    return int(json.loads(config_str)[key])


if __name__ == "__main__":
    sys.exit(main())
