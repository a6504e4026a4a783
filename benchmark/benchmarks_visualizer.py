"""Plot benchmark results from the CSV: one PNG per (kernel, metric, operation mode), one line per provider.

    python benchmark/benchmarks_visualizer.py --kernel-name swiglu --metric-name speed \
        --kernel-operation-mode forward backward full

Each line is the median; the shaded band spans the 20th to 80th percentile. When the selected rows hold several
swept variables (e.g. ``BT`` and ``hidden_size``) each gets its own PNG, suffixed with the variable's name; when
they hold several extra configs or GPUs, each combination gets its own line.
"""

import argparse
import sys

from collections import defaultdict
from pathlib import Path

# Run as a file, the repo root (``benchmark``) is not importable yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.scripts.results_csv import read_benchmark_rows
from benchmark.scripts.results_csv import resolve_csv_path

DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parent / "visualizations"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel-name", required=True, help="e.g. swiglu")
    parser.add_argument("--metric-name", required=True, help="e.g. speed or memory")
    parser.add_argument(
        "--kernel-operation-mode",
        nargs="+",
        default=["full"],
        help="one or more of forward, backward, full (default: full)",
    )
    parser.add_argument("--csv", default=None, help="results CSV (default: $LIGER_BENCHMARK_CSV or benchmark/data)")
    parser.add_argument("--output-dir", default=str(DEFAULT_OUTPUT_DIR), help="where the PNGs go")
    return parser.parse_args(argv)


def _as_number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _distinct(rows: list[dict], column: str) -> list[str]:
    return sorted({row[column] for row in rows})


def plot_rows(rows: list[dict], output_path: Path) -> Path:
    """Draw ``rows`` (one kernel, metric, mode and swept variable) and save them as a PNG at ``output_path``."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must precede pyplot's import
    import matplotlib.pyplot as plt

    first = rows[0]
    configs, gpus = _distinct(rows, "extra_benchmark_config_str"), _distinct(rows, "gpu_name")

    # A line per provider; config and GPU join its identity (and label) only when they vary across the rows.
    lines: dict[str, dict[float | str, dict]] = defaultdict(dict)
    for row in rows:
        label = row["kernel_provider"]
        if len(configs) > 1:
            label += f" {row['extra_benchmark_config_str']}"
        if len(gpus) > 1:
            label += f" [{row['gpu_name']}]"
        lines[label][_as_number(row["x_value"])] = row  # a later row for the same x supersedes an earlier one

    figure, axes = plt.subplots(figsize=(9, 5.5))
    all_x = []
    for label in sorted(lines):
        points = sorted(lines[label].items(), key=lambda item: (isinstance(item[0], str), item[0]))
        xs = [x for x, _ in points]
        all_x.extend(xs)
        median = [float(row["y_value_50"]) for _, row in points]
        low = [float(row["y_value_20"]) for _, row in points]
        high = [float(row["y_value_80"]) for _, row in points]
        (line,) = axes.plot(xs, median, marker="o", label=label)
        axes.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)

    numeric = all(isinstance(x, float) for x in all_x)
    if numeric and min(all_x) > 0 and max(all_x) / min(all_x) >= 8:
        axes.set_xscale("log", base=2)  # sweeps double x each step: equal spacing per step
    if numeric:
        ticks = sorted(set(all_x))
        axes.set_xticks(ticks, [f"{x:g}" for x in ticks])
    axes.set_xlabel(first["x_label"] or first["x_name"])
    axes.set_ylabel(f"{first['metric_name']} ({first['metric_unit']})")
    gpu_title = gpus[0] if len(gpus) == 1 else "several GPUs"
    config_title = f"\n{configs[0]}" if len(configs) == 1 and configs[0] not in ("", "{}") else ""
    axes.set_title(
        f"{first['kernel_name']} {first['metric_name']} ({first['kernel_operation_mode']}) on {gpu_title}{config_title}"
    )
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    output_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output_path, dpi=120)
    plt.close(figure)
    return output_path


def render(
    kernel_name: str, metric_name: str, modes: list[str], csv_path=None, output_dir=DEFAULT_OUTPUT_DIR
) -> list[Path]:
    """Write the PNGs for each mode and return their paths; ValueError when no row matches a mode."""
    rows = read_benchmark_rows(resolve_csv_path(csv_path))
    written = []
    for mode in modes:
        selected = [
            row
            for row in rows
            if row["kernel_name"] == kernel_name
            and row["metric_name"] == metric_name
            and row["kernel_operation_mode"] == mode
        ]
        if not selected:
            kernels = ", ".join(_distinct(rows, "kernel_name")) or "none"
            raise ValueError(
                f"no rows in {resolve_csv_path(csv_path)} for kernel_name={kernel_name!r}, "
                f"metric_name={metric_name!r}, kernel_operation_mode={mode!r} (kernels in the CSV: {kernels})"
            )
        x_names = _distinct(selected, "x_name")
        for x_name in x_names:
            suffix = f"_{x_name}" if len(x_names) > 1 else ""
            path = Path(output_dir) / f"{kernel_name}_{metric_name}_{mode}{suffix}.png"
            written.append(plot_rows([row for row in selected if row["x_name"] == x_name], path))
    return written


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        paths = render(args.kernel_name, args.metric_name, args.kernel_operation_mode, args.csv, args.output_dir)
    except ValueError as error:
        print(f"benchmarks_visualizer: {error}", file=sys.stderr)
        return 1
    for path in paths:
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
