"""``validate --report FILE``: one validate run as a JSON document, for the agents that pass it up and the audit
that re-runs it and compares.

Fields: ``kernel``, ``checkout``, ``workspace``, ``reference`` (where it came from), ``options`` (how validate was
run: ``skip_tests``, ``samples``, ``reference``, ``baseline``, ``focus``, ``archive``, ``ncu``), ``passed``,
``status`` (accept, reject or crash) and ``iteration`` (the run's ``iterations.tsv`` row), ``stages`` (every stage of the run in order, ``NOT RUN`` after
the first failure: ``stage``, ``verdict``, ``summary``), ``unit_tests`` (pytest's counts), ``correctness`` (the
``CORRECTNESS_VALIDATION`` block: ``device``, ``overall``, ``stages`` with ``stage``/``verdict``/``details``),
``samples_passed`` / ``samples_failed`` (the sampler's input sets; null without ``--samples`` or when
correctness did not run), ``sample_failures``, ``samples_sha256`` (the sampler's text as run), ``performance`` (``verdict``, ``summary``, ``figures`` and the
worker's raw ``performance.json``; null when the stage did not run) with its headline figures copied to the top
(``speedup``, ``speedup_compile``, ``liger_ms``, ``peak_mb``, ``speedup_target``, ``delta_vs_target``,
``next_action``: null where absent), ``artifacts`` (paths) and ``files`` (sha256 of the kernel's files and record
as they were validated: a later edit makes the report stale).
"""

from __future__ import annotations

import json

from pathlib import Path

from tools.kernelgen.record import content_hash
from tools.kernelgen.record import find_record
from tools.kernelgen.record import read_record_text
from tools.kernelgen.record import record_key
from tools.kernelgen.validate.report import NOT_RUN
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workspace import STAGE_ORDER
from tools.kernelgen.validate.workspace import status

REPORT_VERSION = 1
# Performance figures copied to the top level, from the stage's figures or else its worker's raw report.
HEADLINE = {
    "speedup": ("speedup", "speedup_vs_torch"),
    "speedup_compile": ("speedup_compile", "speedup_vs_torch_compile"),
    "liger_ms": ("liger_ms",),
    "peak_mb": ("peak_mb",),
    "speedup_target": ("speedup_target",),
    "delta_vs_target": ("delta_vs_target",),
    "next_action": ("next_action",),
}
RAW_FIGURES = {"correctness": "correctness.json", "performance": "performance.json", "baseline": "baseline.json"}


def _stage(results: list[StageResult], name: str) -> StageResult | None:
    return next((result for result in results if result.stage == name), None)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _performance(results: list[StageResult], workspace: Path) -> tuple[dict | None, dict]:
    result = _stage(results, "performance")
    if result is None:
        return None, {key: None for key in HEADLINE}
    raw = None if result.verdict == SKIP else _read_json(workspace / RAW_FIGURES["performance"])
    figures = {k: v for k, v in result.figures.items() if k != "report"}
    headline = {}
    for key, names in HEADLINE.items():
        found = [source[n] for source in (figures, raw or {}) for n in names if source.get(n) is not None]
        headline[key] = found[0] if found else None
    return {"verdict": result.verdict, "summary": result.summary, "figures": figures, "raw": raw}, headline


def _correctness(results: list[StageResult]) -> tuple[dict | None, dict]:
    result = _stage(results, "correctness")
    report = (result.figures.get("report") if result else None) or None
    if report is None:
        return None, {"samples_passed": None, "samples_failed": None, "sample_failures": []}
    tally = report.get("samples") or {}
    correctness = {key: report[key] for key in ("device", "overall", "stages") if key in report}
    return correctness, {
        "samples_passed": tally.get("passed"),
        "samples_failed": tally.get("failed"),
        "sample_failures": tally.get("failures", []),
    }


def build_report(
    target: Target,
    results: list[StageResult],
    iteration: int,
    summary: Path,
    options: dict,
    archived: Path | None,
    path: Path,
) -> dict:
    """The JSON document of one validate run (see the module docstring for its fields)."""
    ran = {result.stage for result in results}
    stages = [{"stage": r.stage, "verdict": r.verdict, "summary": r.summary} for r in results]
    stages += [
        {"stage": s, "verdict": NOT_RUN, "summary": "an earlier stage failed"} for s in STAGE_ORDER if s not in ran
    ]
    correctness, samples = _correctness(results)
    performance, headline = _performance(results, target.workspace)
    unit_tests = _stage(results, "unit tests")
    artifacts = {
        "report": str(path),
        "iterations_tsv": str(target.workspace / "iterations.tsv"),
        "summary": str(summary),
        **{
            f"{name}_json": str(target.workspace / file)
            for name, file in RAW_FIGURES.items()
            if name in ran and (target.workspace / file).exists()
        },
        "samples": str(target.samples) if target.samples else None,
        "archive": str(archived) if archived else None,
    }
    sampler = target.samples.read_text(encoding="utf-8") if target.samples else None
    files = {
        relative: content_hash(target.repo.read(relative))
        for relative in target.paths.values()
        if target.repo.exists(relative)
    }
    record = find_record(target.repo.root, target.name)
    if record is not None:
        files[record_key(target.repo.root, target.name, record)] = content_hash(
            read_record_text(target.repo.root, target.name)
        )
    return {
        "report_version": REPORT_VERSION,
        "kernel": target.name,
        "checkout": str(target.repo.root),
        "workspace": str(target.workspace),
        "reference": target.reference,
        "options": options,
        "passed": not any(result.failed for result in results),
        "status": status(results),
        "iteration": iteration,
        "stages": stages,
        "unit_tests": {k: v for k, v in unit_tests.figures.items()} if unit_tests else {},
        "correctness": correctness,
        **samples,
        "samples_sha256": content_hash(sampler) if sampler is not None else None,
        "performance": performance,
        **headline,
        "artifacts": artifacts,
        "files": files,
    }


def report_text(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
