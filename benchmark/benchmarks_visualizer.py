"""Plot benchmark results from the CSV: one PNG per kernel, metric, operation mode, swept variable and model
configuration, one line per provider.

    python benchmark/benchmarks_visualizer.py --kernel-name swiglu --metric-name speed \
        --kernel-operation-mode forward backward full

Each line is the median; the shaded band spans the 20th to 80th percentile. Rows are grouped by their model
configuration (the ``model`` of ``extra_benchmark_config_str``, e.g. ``llama_3_8b``): one plot each. Within a
model, when exactly one other config value varies (say ``intermediate_size`` of a size comparison), it stays in one
plot and the legend says ``liger (intermediate_size=4096)``; when several vary, each configuration gets its own
plot. Legends name the provider (and that one varying value, and the GPU when several are in the rows); the fixed
configuration goes to the title, never raw JSON to the legend. Files: ``KERNEL_METRIC_MODE[_X][_MODEL...].png``,
the suffixes only where the CSV has more than one swept variable or model configuration for them.
"""

import argparse
import json
import re
import sys

from collections import defaultdict
from pathlib import Path

# Run as a file, the repo root (``benchmark``) is not importable yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.scripts.results_csv import read_benchmark_rows
from benchmark.scripts.results_csv import resolve_csv_path

DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parent / "visualizations"
# One colour per provider in every plot; the varying config value changes the marker and line style instead.
PROVIDER_COLORS = {"liger": "C0", "torch": "C1", "torch_compile": "C2", "liger_upstream": "C3"}
STYLES = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", "-")]


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


def _config(row: dict) -> dict:
    """The row's extra config without the swept variable itself (a one-point run records its x there too)."""
    try:
        config = json.loads(row["extra_benchmark_config_str"] or "{}")
    except ValueError:
        return {"config": row["extra_benchmark_config_str"]}
    if not isinstance(config, dict):
        return {"config": config}
    config.pop(row["x_name"], None)
    return config


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _sort_value(text: str):
    number = _as_number(text)
    return (isinstance(number, str), number)


def plot_groups(rows: list[dict]) -> list[tuple[list[str], list[dict], str | None]]:
    """The plots of one kernel, metric, mode and swept variable: ``(name parts, rows, varying config key)``, one
    per model configuration (see the module docstring)."""
    by_model: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_model[str(_config(row).get("model", ""))].append(row)
    groups = []
    for model in sorted(by_model):
        members = by_model[model]
        keys = sorted({key for row in members for key in _config(row)})
        varying = [key for key in keys if len({_key(_config(row).get(key)) for row in members}) > 1]
        if len(varying) <= 1:
            groups.append(([model] if model else [], members, varying[0] if varying else None))
            continue
        by_config: dict[str, list[dict]] = defaultdict(list)
        for row in members:
            by_config[_key(_config(row))].append(row)
        for config_key in sorted(by_config):
            config = json.loads(config_key)
            parts = [model] if model else []
            parts += [f"{key}_{config[key]}" for key in varying if key in config]
            groups.append((parts, by_config[config_key], None))
    return groups


def _fixed_config(rows: list[dict], varying: str | None) -> str:
    """The configuration every row shares, in words: ``llama_3_8b: dtype=bfloat16, intermediate_size=14336``."""
    config = _config(rows[0])
    shared = {k: v for k, v in config.items() if k != varying and all(_config(r).get(k) == v for r in rows)}
    model = shared.pop("model", None)
    text = ", ".join(f"{key}={value}" for key, value in sorted(shared.items()))
    return f"{model}: {text}" if model and text else str(model or text)


def line_identity(row: dict, varying: str | None, several_gpus: bool) -> tuple:
    """The line a row belongs to, ending with its legend label: the provider, then the varying config value and the
    GPU only when they vary (``liger (intermediate_size=4096)``, ``torch [NVIDIA H200]``)."""
    value = _config(row).get(varying) if varying else None
    label = row["kernel_provider"]
    if varying:
        label += f" ({varying}={value})"
    if several_gpus:
        label += f" [{row['gpu_name']}]"
    order = _sort_value(str(value)) if varying else (False, "")
    return (row["kernel_provider"], order, row["gpu_name"] if several_gpus else "", label)


def plot_rows(rows: list[dict], output_path: Path, varying: str | None = None) -> Path:
    """Draw ``rows`` (one kernel, metric, mode, swept variable and model configuration) as a PNG at
    ``output_path``; ``varying``: the one config key whose value joins each line's label."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must precede pyplot's import
    import matplotlib.pyplot as plt

    first = rows[0]
    gpus = _distinct(rows, "gpu_name")

    lines: dict[tuple, dict[float | str, dict]] = defaultdict(dict)
    for row in rows:
        # a later row for the same line and x supersedes an earlier one
        lines[line_identity(row, varying, len(gpus) > 1)][_as_number(row["x_value"])] = row

    figure, axes = plt.subplots(figsize=(9, 5.5))
    all_x = []
    providers = sorted({identity[0] for identity in lines})
    others = [p for p in providers if p not in PROVIDER_COLORS]
    variants = sorted({identity[1:3] for identity in lines})
    for identity in sorted(lines):
        points = sorted(lines[identity].items(), key=lambda item: (isinstance(item[0], str), item[0]))
        xs = [x for x, _ in points]
        all_x.extend(xs)
        median = [float(row["y_value_50"]) for _, row in points]
        low = [float(row["y_value_20"]) for _, row in points]
        high = [float(row["y_value_80"]) for _, row in points]
        color = PROVIDER_COLORS.get(identity[0]) or f"C{len(PROVIDER_COLORS) + others.index(identity[0])}"
        marker, style = STYLES[variants.index(identity[1:3]) % len(STYLES)]
        axes.plot(xs, median, marker=marker, linestyle=style, color=color, label=identity[-1])
        axes.fill_between(xs, low, high, color=color, alpha=0.2)

    numeric = all(isinstance(x, float) for x in all_x)
    if numeric and min(all_x) > 0 and max(all_x) / min(all_x) >= 8:
        axes.set_xscale("log", base=2)  # sweeps double x each step: equal spacing per step
    if numeric:
        ticks = sorted(set(all_x))
        axes.set_xticks(ticks, [f"{x:g}" for x in ticks])
    axes.set_xlabel(first["x_label"] or first["x_name"])
    axes.set_ylabel(f"{first['metric_name']} ({first['metric_unit']})")
    gpu_title = gpus[0] if len(gpus) == 1 else "several GPUs"
    fixed = _fixed_config(rows, varying)
    axes.set_title(
        f"{first['kernel_name']} {first['metric_name']} ({first['kernel_operation_mode']}) on {gpu_title}"
        + (f"\n{fixed}" if fixed else "")
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
            groups = plot_groups([row for row in selected if row["x_name"] == x_name])
            for parts, group, varying in groups:
                suffix = f"_{x_name}" if len(x_names) > 1 else ""
                if len(groups) > 1:
                    suffix += "".join(f"_{_slug(part)}" for part in parts)
                path = Path(output_dir) / f"{kernel_name}_{metric_name}_{mode}{suffix}.png"
                written.append(plot_rows(group, path, varying))
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
