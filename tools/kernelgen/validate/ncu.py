"""``--ncu``: Nsight Compute's speed-of-light figures for each kernel of one forward+backward step.

``ncu --clock-control none --profile-from-start off --metrics ... --csv --page raw python -m
tools.kernelgen.validate.ncu_step REPO NAME`` profiles the step ``ncu_step`` brackets with
``cudaProfilerStart``/``Stop`` (warm-up outside, so Triton's compilation launches are not in it). Per kernel:

- duration: ``gpu__time_duration.sum``;
- compute (SM) throughput: ``sm__throughput.avg.pct_of_peak_sustained_elapsed``;
- memory throughput: ``gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed`` (and DRAM's own,
  ``dram__throughput.avg.pct_of_peak_sustained_elapsed``);
- achieved occupancy: ``sm__warps_active.avg.pct_of_peak_sustained_active``;
- bottleneck, from the two throughputs as ncu's speed-of-light section reads them: the busier of memory and SM
  when it reaches 60% of its peak, ``latency`` when neither does (too little in flight to keep either busy).

The parser reads both CSV layouts ncu writes: ``--page raw`` (one row per launch, one column per metric, a units
row under the header) and the details page (one row per metric, ``Metric Name``/``Metric Unit``/``Metric Value``);
lines that are not CSV (``==PROF==``, the program's own output) are skipped. When ncu is not on PATH, there is no
GPU, or ncu cannot read the counters (``LibraryNotLoaded``, ``ERR_NVGPUCTRPERM``), the result is one skip line.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

from dataclasses import dataclass

DURATION = "gpu__time_duration.sum"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
METRICS = (DURATION, COMPUTE, MEMORY, DRAM, OCCUPANCY)
BOUND = 60.0  # % of peak: below it on both memory and SM, a kernel is latency bound
TIME_UNITS_US = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
    "s": 1e6,
}
# What ncu prints when it runs but cannot read the hardware counters (the reason is its first error line).
COUNTER_ERRORS = ("LibraryNotLoaded", "ERR_NVGPUCTRPERM", "Failed to initialize the profiler", "not supported")
DRIVER = "tools.kernelgen.validate.ncu_step"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Launch:
    """One kernel launch of the profiled step with its metrics (None where ncu reported n/a)."""

    name: str
    metrics: dict[str, float | None]


def _number(text: str) -> float | None:
    text = (text or "").strip()
    if not text or text.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _value(metric: str, text: str, unit: str) -> float | None:
    """A metric's value in the unit the summary uses: microseconds for the duration, percent for the rest."""
    value = _number(text)
    if value is None:
        return None
    if metric == DURATION:
        return value * TIME_UNITS_US.get(unit.strip(), 1e-3)  # ncu's default unit for durations is nanoseconds
    return value


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV table in ncu's output: from the header (``"ID",...``) on, lines that are not CSV rows left out."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    table = [line for line in lines[start:] if line.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(table))))


def parse_csv(text: str) -> list[Launch]:
    """Every launch in ncu's CSV output, in launch order (see the module docstring for the two layouts)."""
    rows = _csv_rows(text)
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    column = {name: index for index, name in enumerate(header)}
    if "Kernel Name" not in column:
        return []
    if "Metric Name" in column:  # details page: one row per metric
        launches: dict[str, tuple[str, dict]] = {}
        for row in body:
            if len(row) < len(header):
                continue
            metric = row[column["Metric Name"]]
            name, metrics = launches.setdefault(row[column["ID"]], (row[column["Kernel Name"]], {}))
            if metric in METRICS:
                metrics[metric] = _value(metric, row[column["Metric Value"]], row[column["Metric Unit"]])
        return [Launch(name, metrics) for name, metrics in launches.values()]
    units = {}
    if body and body[0] and body[0][0] == "":  # raw page: the units row under the header
        units = dict(zip(header, body[0]))
        body = body[1:]
    result = []
    for row in body:
        if len(row) < len(header):
            continue
        metrics = {m: _value(m, row[column[m]], units.get(m, "")) for m in METRICS if m in column}
        result.append(Launch(row[column["Kernel Name"]], metrics))
    return result


def bottleneck(compute_pct: float | None, memory_pct: float | None) -> str:
    """memory, compute or latency (see the module docstring); unknown without both throughputs."""
    if compute_pct is None or memory_pct is None:
        return "unknown"
    if max(compute_pct, memory_pct) < BOUND:
        return "latency"
    return "memory" if memory_pct >= compute_pct else "compute"


def summarize_kernels(launches: list[Launch]) -> list[dict]:
    """One entry per kernel (launches of the same kernel merged: time summed, percentages weighted by time),
    longest first."""
    merged: dict[str, list[Launch]] = {}
    for launch in launches:
        merged.setdefault(launch.name, []).append(launch)
    kernels = []
    for name, group in merged.items():
        durations = [launch.metrics.get(DURATION) or 0.0 for launch in group]
        total = sum(durations)

        def average(metric: str, group=group, durations=durations, total=total) -> float | None:
            pairs = [(launch.metrics.get(metric), d) for launch, d in zip(group, durations)]
            pairs = [(value, d) for value, d in pairs if value is not None]
            if not pairs:
                return None
            weight = sum(d for _, d in pairs)
            if weight <= 0:
                return sum(value for value, _ in pairs) / len(pairs)
            return sum(value * d for value, d in pairs) / weight

        compute, memory = average(COMPUTE), average(MEMORY)
        kernels.append(
            {
                "name": name,
                "launches": len(group),
                "duration_us": total if any(launch.metrics.get(DURATION) is not None for launch in group) else None,
                "compute_pct": compute,
                "memory_pct": memory,
                "dram_pct": average(DRAM),
                "occupancy_pct": average(OCCUPANCY),
                "bottleneck": bottleneck(compute, memory),
            }
        )
    return sorted(kernels, key=lambda kernel: -(kernel["duration_us"] or 0.0))


def _pct(value: float | None) -> str:
    return f"{value:5.1f}%" if value is not None else "    -"


def block(kernels: list[dict], label: str = "") -> str:
    lines = ["NCU_PROFILE" + (f" ({label})" if label else ""), "one forward+backward step, per kernel, longest first"]
    for kernel in kernels:
        duration = f"{kernel['duration_us']:9.1f} us" if kernel["duration_us"] is not None else "        - us"
        launches = f" x{kernel['launches']}" if kernel["launches"] > 1 else ""
        lines.append(
            f"kernel: {kernel['name'][:60]}{launches}  {duration}  bottleneck: {kernel['bottleneck']:<8} "
            f"memory {_pct(kernel['memory_pct'])} (DRAM {_pct(kernel['dram_pct'])})  "
            f"compute (SM) {_pct(kernel['compute_pct'])}  occupancy {_pct(kernel['occupancy_pct'])}"
        )
    return "\n".join(lines)


def counter_problem(output: str) -> str | None:
    """Why ncu could not profile, from its own output (its first ``==ERROR==`` line), or None."""
    errors = [line.strip() for line in output.splitlines() if line.startswith("==ERROR==")]
    for line in errors:
        if any(marker in line for marker in COUNTER_ERRORS):
            return line.removeprefix("==ERROR==").strip()
    return errors[0].removeprefix("==ERROR==").strip() if errors else None


def find_ncu() -> str | None:
    """``$KERNELGEN_NCU`` when set, else ``ncu`` on PATH."""
    return os.environ.get("KERNELGEN_NCU") or shutil.which("ncu")


def command(ncu: str, repo: str, name: str, spec: str | None = None) -> list[str]:
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--metrics",
        ",".join(METRICS),
        "--csv",
        "--page",
        "raw",
        sys.executable,
        "-m",
        DRIVER,
        repo,
        name,
        *([spec] if spec else []),
    ]


def profile(repo: str, name: str, cuda: bool, spec: str | None = None, env: dict | None = None, cwd=None):
    """``(kernels, None)`` or ``(None, why it was skipped)``: one line, for the skip message."""
    if not cuda:
        return None, "no GPU (Nsight Compute profiles CUDA kernels)"
    ncu = find_ncu()
    if ncu is None:
        return None, "ncu (Nsight Compute) is not on PATH"
    try:
        result = subprocess.run(
            command(ncu, repo, name, spec),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
            env=env,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired:
        return None, f"ncu ran past {TIMEOUT_S} s"
    except OSError as error:
        return None, f"cannot run {ncu}: {error.strerror}"
    output = result.stdout + "\n" + result.stderr
    problem = counter_problem(output)
    if problem:
        return None, f"ncu cannot read the GPU's counters here: {problem}"
    kernels = summarize_kernels(parse_csv(result.stdout))
    if not kernels:
        last = [line for line in output.strip().splitlines() if line.strip()]
        return None, f"ncu profiled no kernel (exit {result.returncode}; {last[-1] if last else 'no output'})"
    return kernels, None
