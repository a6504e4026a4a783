"""``validate NAME --baseline REV|PATH``: the kernel in the working tree against the same kernel elsewhere.

The baseline is a git revision of the checkout (checked out into a temporary worktree for the run, removed after)
or a folder: another checkout, or one ``export-baseline`` wrote (its ``src/`` at a revision, for a GPU machine
that has no git history). Stage 6 runs ``baseline_worker`` (both libraries in one process, the kernel's benchmark
shapes, forward, backward and full) and says which is faster by how much; it needs a GPU, except with ``--smoke``
(the benchmark's CPU smoke shapes under the interpreter: checks the plumbing, the figures mean nothing).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import tarfile
import tempfile

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import WARN
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workers import WorkerFailed
from tools.kernelgen.validate.workers import run_worker

WORKER = "tools.kernelgen.validate.baseline_worker"
TIMEOUT_S = 1800
SLOWER = 0.95  # a working tree slower than this fraction of the baseline's speed gets a WARN
MARKER = "BASELINE"  # the file export-baseline writes beside src/: what it was exported from
MODES = ("forward", "backward", "full")


class BaselineError(ValueError):
    """A --baseline or export-baseline that cannot be used; one line, nothing written."""


@dataclass
class Baseline:
    label: str  # what the report calls it: "HEAD~3 (1a2b3c4d5e)" or the folder
    src: Path  # the folder holding its liger_kernel package


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def resolve_revision(repo: Path, revision: str, name: str) -> str:
    """The commit of ``revision``, checked to hold kernel ``name``; raises ``BaselineError``."""
    try:
        found = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except FileNotFoundError:
        raise BaselineError(f"--baseline {revision}: git is not installed (export the baseline elsewhere)") from None
    if found.returncode != 0:
        raise BaselineError(f"--baseline {revision}: not a folder, and not a git revision of {repo}")
    commit = found.stdout.strip()
    ops = kernel_paths(name)["ops"]
    if _git(repo, "cat-file", "-e", f"{commit}:{ops}").returncode != 0:
        raise BaselineError(f"--baseline {revision}: kernel '{name}' does not exist there ({ops} is missing)")
    return commit


def _library_of(folder: Path) -> Path | None:
    for candidate in (folder / "src", folder):
        if (candidate / "liger_kernel" / "__init__.py").is_file():
            return candidate
    return None


@contextlib.contextmanager
def open_baseline(repo: Path, spec: str, name: str):
    """The baseline ``spec`` names, for the length of the block (a revision's temporary worktree is removed after)."""
    folder = Path(spec)
    if folder.is_dir():
        src = _library_of(folder)
        if src is None:
            raise BaselineError(f"--baseline {spec}: a folder without src/liger_kernel (a checkout or an export)")
        if not (src / "liger_kernel" / "ops" / f"{name}.py").is_file():
            raise BaselineError(f"--baseline {spec}: kernel '{name}' does not exist there")
        marker = folder / MARKER
        label = f"{spec} ({marker.read_text(encoding='utf-8').strip()})" if marker.is_file() else spec
        yield Baseline(label, src)
        return
    commit = resolve_revision(repo, spec, name)
    scratch = Path(tempfile.mkdtemp(prefix="kernelgen-baseline-"))
    tree = scratch / "tree"
    added = _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
    try:
        if added.returncode != 0:
            message = (added.stderr.strip().splitlines() or ["failed"])[-1]
            raise BaselineError(f"--baseline {spec}: cannot check it out ({message})")
        yield Baseline(f"{spec} ({commit[:10]})", tree / "src")
    finally:
        _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(scratch, ignore_errors=True)
        _git(repo, "worktree", "prune")


def export_baseline(repo: Path, revision: str, destination: Path, name: str | None = None) -> str:
    """Write ``src/`` of ``revision`` to ``destination`` (all or nothing) with a ``BASELINE`` file naming it."""
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise BaselineError(f"export-baseline: {destination} exists and is not an empty folder; nothing written")
    if not destination.parent.is_dir():
        raise BaselineError(f"export-baseline: folder {destination.parent} does not exist; nothing written")
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode != 0:
        raise BaselineError(f"export-baseline: {revision} is not a git revision of {repo}; nothing written")
    commit = found.stdout.strip()
    if name is not None:
        resolve_revision(repo, revision, name)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        with tempfile.TemporaryFile() as archive:
            result = subprocess.run(
                ["git", "-C", str(repo), "archive", "--format=tar", commit, "src"], stdout=archive, check=False
            )
            if result.returncode != 0:
                raise BaselineError(f"export-baseline: git archive {revision} failed; nothing written")
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(staging, **safe)
        (staging / MARKER).write_text(f"{revision} = {commit}\n", encoding="utf-8")
        if destination.exists():
            destination.rmdir()
        staging.rename(destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return commit


# The comparison ----------------------------------------------------------------------------------------------
def geometric_mean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(report: dict) -> dict:
    """Per mode: the working tree's speedup over the baseline (baseline ms / working-tree ms) and its peak memory
    as a fraction of the baseline's, geometric means over the shapes."""
    summary = {}
    for mode in MODES:
        rows = [row for row in report["rows"] if row["mode"] == mode]
        speedups = [row["baseline_ms"] / row["current_ms"] for row in rows if row["current_ms"]]
        memory = [row["current_mb"] / row["baseline_mb"] for row in rows if row["baseline_mb"]]
        summary[mode] = {"speedup": geometric_mean(speedups), "memory": geometric_mean(memory), "shapes": len(rows)}
    return summary


def _faster(speedup: float | None, label: str) -> str:
    if speedup is None:
        return "no timing"
    if speedup >= 1.0:
        return f"working tree {speedup:.2f}x faster than {label}"
    return f"working tree {1 / speedup:.2f}x slower than {label}"


def block(report: dict, label: str, name: str) -> str:
    lines = [
        "BASELINE_COMPARISON",
        f"kernel: {name}  working tree vs {label}  device: {report['device']}  dtype: {report['dtype']}  "
        f"{report['size_key']}: {report['size']}"
        + ("  (--smoke: plumbing only, figures mean nothing)" if report["smoke"] else ""),
        f"{'mode':<9} {'BT':>6} {'tree ms':>10} {'base ms':>10} {'speedup':>8} {'tree MB':>10} {'base MB':>10}",
    ]
    for row in report["rows"]:
        speedup = row["baseline_ms"] / row["current_ms"] if row["current_ms"] else float("nan")
        lines.append(
            f"{row['mode']:<9} {row['BT']:>6} {row['current_ms']:>10.4f} {row['baseline_ms']:>10.4f} {speedup:>7.2f}x "
            f"{row['current_mb']:>10.2f} {row['baseline_mb']:>10.2f}"
        )
    for mode, figures in summarize(report).items():
        memory = f"{figures['memory']:.2f}x of its peak memory" if figures["memory"] else "peak memory not measured"
        lines.append(
            f"{mode}: {_faster(figures['speedup'], label)} (geometric mean of {figures['shapes']} shapes), {memory}"
        )
    return "\n".join(lines)


def run_stage(target: Target, baseline: Baseline, cuda: bool, smoke: bool) -> StageResult:
    if not cuda and not smoke:
        return StageResult("baseline", SKIP, f"no GPU; run validate on a CUDA device (baseline {baseline.label})")
    extra = (str(baseline.src),) + (("--smoke",) if smoke else ())
    try:
        report = run_worker(WORKER, target, "baseline.json", timeout=TIMEOUT_S, extra=extra, spec=False)
    except WorkerFailed as error:
        return StageResult("baseline", FAIL, f"the comparison with {baseline.label} crashed: {error}", crashed=True)
    if "skipped" in report:
        return StageResult("baseline", SKIP, f"no GPU; run validate on a CUDA device (baseline {baseline.label})")
    print(block(report, baseline.label, target.name))
    full = summarize(report)["full"]
    figures = {"baseline": baseline.label, "speedup_vs_baseline": full["speedup"], "memory_vs_baseline": full["memory"]}
    verdict = WARN if full["speedup"] is not None and full["speedup"] < SLOWER and not smoke else PASS
    memory = f", peak memory {full['memory']:.2f}x" if full["memory"] else ""
    return StageResult(
        "baseline", verdict, f"forward+backward: {_faster(full['speedup'], baseline.label)}{memory}", figures
    )


__all__ = ["Baseline", "BaselineError", "export_baseline", "open_baseline", "run_stage", "summarize"]
