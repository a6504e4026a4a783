"""The validation workspace: ``iterations.tsv`` (one row per run, for the optimize loop) and ``summary.md``."""

from __future__ import annotations

import datetime

from pathlib import Path

from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import NOT_RUN
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target

COLUMNS = ("iter", "speedup", "correctness", "purity", "focus", "status", "description")
STAGE_ORDER = ("checkstyle", "purity", "unit tests", "correctness", "performance")


def default_workspace(repo_root: Path, name: str) -> Path:
    return repo_root / ".kernelgen-work" / name


def _verdict(results: list[StageResult], stage: str) -> str:
    for result in results:
        if result.stage == stage:
            return result.verdict
    return NOT_RUN


def status(results: list[StageResult]) -> str:
    failed = [r.stage for r in results if r.verdict == FAIL]
    return f"fail:{failed[0]}" if failed else "pass"


def auto_description(results: list[StageResult]) -> str:
    return "; ".join(f"{r.stage} {r.verdict}" for r in results)


def _cell(text: str) -> str:
    return " ".join(str(text).replace("\t", " ").split())


def append_iteration(workspace: Path, results: list[StageResult], focus: str, description: str) -> int:
    """Append this run's row to ``iterations.tsv`` (header on first use); returns its iteration number."""
    path = workspace / "iterations.tsv"
    rows = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not rows:
        rows = ["\t".join(COLUMNS)]
        path.write_text(rows[0] + "\n", encoding="utf-8")
    iteration = len([row for row in rows[1:] if row.strip()]) + 1
    speedup = next((r.figures.get("speedup") for r in results if r.stage == "performance"), None)
    row = [
        str(iteration),
        f"{speedup:.3f}" if isinstance(speedup, (int, float)) else "-",
        _verdict(results, "correctness"),
        _verdict(results, "purity"),
        _cell(focus),
        status(results),
        _cell(description or auto_description(results)),
    ]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\t".join(row) + "\n")
    return iteration


def write_summary(target: Target, results: list[StageResult], iteration: int, extra: list[str]) -> Path:
    path = target.workspace / "summary.md"
    profile = target.profile
    when = datetime.datetime.now().isoformat(timespec="seconds")
    lines = [
        f"# validate {target.name}: {status(results)}",
        "",
        f"- kernel: `{profile.function_class_name}` (tier {profile.tier}: {profile.tier_description})",
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
        if result.stage not in STAGE_ORDER:  # optional stages (--baseline) appear only when they ran
            lines.append(f"| {result.stage} | {result.verdict} | {result.summary.replace('|', '/')} |")
    for block_name in ("correctness.json", "performance.json", "baseline.json"):
        if (target.workspace / block_name).exists():
            lines.append("")
            lines.append(f"Raw figures: `{block_name}` beside this file.")
    lines.extend(["", *extra] if extra else [])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
