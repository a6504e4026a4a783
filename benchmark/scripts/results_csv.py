"""The benchmark results table: one CSV row per (experiment, x value), shared by all kernel scripts.

Standard library only, so the visualizer can read the table without importing torch.
"""

import csv
import json
import os

from pathlib import Path
from typing import Iterable

CSV_COLUMNS = [
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "metric_unit",
    "x_name",
    "x_label",
    "x_value",
    "y_value_50",
    "y_value_20",
    "y_value_80",
    "extra_benchmark_config_str",
    "gpu_name",
    "timestamp",
    "liger_version",
]

# Two rows describe the same experiment when these agree; the remaining columns are its result and provenance.
EXPERIMENT_KEY_COLUMNS = (
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "x_name",
    "x_value",
    "extra_benchmark_config_str",
    "gpu_name",
)

CSV_PATH_ENV_VAR = "LIGER_BENCHMARK_CSV"
DEFAULT_CSV_PATH = Path(__file__).resolve().parents[1] / "data" / "all_benchmark_data.csv"


def resolve_csv_path(csv_path: str | os.PathLike | None = None) -> Path:
    """An explicit path wins, then ``$LIGER_BENCHMARK_CSV``, then the committed ``benchmark/data`` table."""
    if csv_path is not None:
        return Path(csv_path)
    from_env = os.environ.get(CSV_PATH_ENV_VAR)
    return Path(from_env) if from_env else DEFAULT_CSV_PATH


def config_string(config: dict) -> str:
    """A run's extra benchmark config as stored in ``extra_benchmark_config_str``: JSON with sorted keys."""
    return json.dumps(config, sort_keys=True, default=str)


def experiment_key(row: dict) -> tuple[str, ...]:
    return tuple(str(row[column]) for column in EXPERIMENT_KEY_COLUMNS)


def read_benchmark_rows(csv_path: str | os.PathLike | None = None) -> list[dict]:
    """All rows of the table as string dicts; a missing or empty file reads as no rows."""
    path = resolve_csv_path(csv_path)
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def update_benchmark_csv(
    new_rows: Iterable[dict], csv_path: str | os.PathLike | None = None, overwrite: bool = False
) -> tuple[int, int]:
    """Merge ``new_rows`` into the table and return ``(written, skipped)``.

    A new row whose experiment is already in the table replaces the old row (in place, so the file keeps its
    order) when ``overwrite`` is set; otherwise the old row is kept and the new one is skipped, so an earlier
    measurement is never silently duplicated or lost.
    """
    path = resolve_csv_path(csv_path)
    rows = read_benchmark_rows(path)
    index_of = {experiment_key(row): i for i, row in enumerate(rows)}
    written = skipped = 0
    for new_row in new_rows:
        row = {column: new_row[column] for column in CSV_COLUMNS}
        key = experiment_key(row)
        if key in index_of:
            if not overwrite:
                skipped += 1
                continue
            rows[index_of[key]] = row
        else:
            index_of[key] = len(rows)
            rows.append(row)
        written += 1
    if written:
        _write_rows(path, rows)
    return written, skipped


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write next to the target and rename, so an interrupted sweep never leaves a half-written table behind.
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(temporary, path)
