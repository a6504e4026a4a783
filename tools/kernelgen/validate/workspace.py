"""The workspace: ``iterations.tsv`` (one row per validate run or tune candidate) and ``summary.md``.

A row's ``status`` is one of three words, for ``validate`` and ``tune`` alike: ``accept`` (every stage passed; for a
tune candidate: correct and faster than the best so far), ``reject`` (a stage failed, or a tune candidate was not
faster; the description says which) and ``crash`` (something could not run: the kernel does not import, a worker
died, the kernel raised). The ``correctness`` and ``purity`` columns say PASSED, FAILED (WARN for a purity finding
in hand-written code that is no gate) or ``-`` when the stage did not run.
"""

from __future__ import annotations

import datetime

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import NOT_RUN
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target

COLUMNS = ("iter", "speedup", "correctness", "purity", "focus", "status", "description")
ACCEPT = "accept"
REJECT = "reject"
CRASH = "crash"
STATUSES = (ACCEPT, REJECT, CRASH)
PASSED = "PASSED"
FAILED = "FAILED"
STAGE_ORDER = ("checkstyle", "purity", "unit tests", "correctness", "performance")
ITERATIONS = "iterations.tsv"


@dataclass(frozen=True)
class IterationRow:
    """One row of ``iterations.tsv`` before it gets its number. ``speedup``: eager PyTorch ms / kernel ms."""

    speedup: float | None
    correctness: str
    purity: str
    focus: str
    status: str
    description: str

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"iterations.tsv status {self.status!r} is not one of {', '.join(STATUSES)}")


WORK_DIR = ".kernelgen-work"
# Written into WORK_DIR when kernelgen creates a folder under it: a target checkout whose .gitignore does not name it
# (upstream Liger-Kernel's) keeps a clean `git status`, and `git add -A` leaves the workspaces out.
WORK_DIR_GITIGNORE = "# kernelgen's workspaces (validate, tune, workflow runs, patch references): never committed\n*\n"


def default_workspace(repo_root: Path, name: str) -> Path:
    return repo_root / WORK_DIR / name


def ignore_work_dir(path: Path) -> None:
    """When ``path`` lies under a ``.kernelgen-work/`` folder, give that folder a ``.gitignore`` of ``*`` (as
    pytest's cache does) unless it has one: a tracked file of the checkout is never touched."""
    for folder in (path, *path.parents):
        if folder.name == WORK_DIR:
            ignore = folder / ".gitignore"
            if folder.is_dir() and not ignore.exists():
                ignore.write_text(WORK_DIR_GITIGNORE)
            return


def create_workspace(folder: Path) -> Path:
    """``folder`` created (with its parents), its ``.kernelgen-work/`` ignored by git (``ignore_work_dir``)."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore_work_dir(folder)
    return folder


def tsv_verdict(verdict: str) -> str:
    """A stage verdict as the tsv's correctness/purity columns write it."""
    return {PASS: PASSED, FAIL: FAILED, NOT_RUN: "-"}.get(verdict, verdict)


def _verdict(results: list[StageResult], stage: str) -> str:
    for result in results:
        if result.stage == stage:
            return result.verdict
    return NOT_RUN


def first_failure(results: list[StageResult]) -> StageResult | None:
    return next((r for r in results if r.failed), None)


def status(results: list[StageResult]) -> str:
    """accept, reject or crash for one validate run."""
    failed = first_failure(results)
    if failed is None:
        return ACCEPT
    return CRASH if failed.crashed else REJECT


def auto_description(results: list[StageResult]) -> str:
    return "; ".join(f"{r.stage} {r.verdict}" for r in results)


def _cell(text: str) -> str:
    return " ".join(str(text).replace("\t", " ").split())


def validate_row(results: list[StageResult], focus: str, description: str) -> IterationRow:
    """The row of one validate run: a rejected or crashed run's description starts with the stage that stopped it."""
    speedup = next((r.figures.get("speedup") for r in results if r.stage == "performance"), None)
    text = description or auto_description(results)
    failed = first_failure(results)
    if failed is not None:
        text = f"{'crashed' if failed.crashed else 'failed'} at {failed.stage}: {failed.summary}" + (
            f" ({description})" if description else ""
        )
    return IterationRow(
        speedup=speedup if isinstance(speedup, (int, float)) else None,
        correctness=tsv_verdict(_verdict(results, "correctness")),
        purity=tsv_verdict(_verdict(results, "purity")),
        focus=focus,
        status=status(results),
        description=text,
    )


def append_row(workspace: Path, row: IterationRow) -> int:
    """Append ``row`` to ``iterations.tsv`` (header on first use); returns its iteration number."""
    path = workspace / ITERATIONS
    rows = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not rows:
        rows = ["\t".join(COLUMNS)]
        path.write_text(rows[0] + "\n", encoding="utf-8")
    iteration = len([line for line in rows[1:] if line.strip()]) + 1
    cells = [
        str(iteration),
        f"{row.speedup:.3f}" if row.speedup is not None else "-",
        row.correctness,
        row.purity,
        _cell(row.focus),
        row.status,
        _cell(row.description),
    ]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\t".join(cells) + "\n")
    return iteration


def read_rows(workspace: Path) -> list[dict[str, str]]:
    """The rows of ``iterations.tsv`` as dicts keyed by ``COLUMNS`` (none when it does not exist)."""
    path = workspace / ITERATIONS
    if not path.exists():
        return []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [dict(zip(COLUMNS, line.split("\t"))) for line in lines[1:]]


def append_iteration(workspace: Path, results: list[StageResult], focus: str, description: str) -> int:
    """Append one validate run's row; returns its iteration number."""
    return append_row(workspace, validate_row(results, focus, description))


def _kernel_called(target: Target) -> str:
    """What the stages call: the kernel's own entry where it is not checked against a generation record (upstream's
    ``liger_kernel.transformers.functional.liger_geglu``), else the generated Function."""
    if target.call:
        return f"{target.call['module']}.{target.call['callable']}"
    return target.profile.function_class_name


def write_summary(target: Target, results: list[StageResult], iteration: int, extra: list[str]) -> Path:
    path = target.workspace / "summary.md"
    profile = target.profile
    when = datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"# validate {target.name}: {status(results)}",
        "",
        f"- kernel: `{_kernel_called(target)}` (tier {profile.tier}: {profile.tier_description})",
        f"- checkout: `{target.repo.root}`",
        f"- iteration: {iteration} ({when})",
        f"- files: {', '.join(f'`{p}`' for p in target.paths.values())}",
        "",
        "| stage | verdict | details |",
        "| --- | --- | --- |",
    ]
    for stage in STAGE_ORDER:
        result = next((r for r in results if r.stage == stage), None)
        verdict, summary = (result.verdict, result.summary) if result else (NOT_RUN, "an earlier stage failed")
        lines.append(f"| {stage} | {verdict} | {summary.replace('|', '/')} |")
    for result in results:
        if result.stage not in STAGE_ORDER:  # optional stages (--ncu, --baseline) appear only when they ran
            lines.append(f"| {result.stage} | {result.verdict} | {result.summary.replace('|', '/')} |")
    stages = next((r.figures.get("stages") for r in results if r.stage == "correctness"), None)
    if stages:
        lines.extend(["", "Correctness stages: " + ", ".join(f"{name} {verdict}" for name, verdict in stages.items())])
    target_line = next((r.figures.get("target_line") for r in results if r.stage == "performance"), None)
    if target_line:
        lines.extend(["", target_line])
    for block_name in ("correctness.json", "ncu.json", "performance.json", "baseline.json"):
        if (target.workspace / block_name).exists():
            lines.append("")
            lines.append(f"Raw figures: `{block_name}` beside this file.")
    lines.extend(["", *extra] if extra else [])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
