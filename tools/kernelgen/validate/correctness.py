"""Stage 4: staged correctness against the reference (``correctness_worker`` in a subprocess) and its report."""

from __future__ import annotations

from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workers import WorkerFailed
from tools.kernelgen.validate.workers import run_worker

WORKER = "tools.kernelgen.validate.correctness_worker"


def block(report: dict) -> str:
    lines = ["CORRECTNESS_VALIDATION", f"device: {report['device']}"]
    for stage in report["stages"]:
        lines.append(f"stage: {stage['stage']:<12} verdict: {stage['verdict']:<5} details: {stage['details']}")
    lines.append(f"overall: {report['overall']}")
    return "\n".join(lines)


def run(target: Target) -> StageResult:
    try:
        report = run_worker(WORKER, target, "correctness.json")
    except WorkerFailed as error:
        return StageResult("correctness", FAIL, f"the correctness run crashed: {error}")
    if "skipped" in report:  # a kernel that cannot run on this machine (TileLang without a GPU)
        return StageResult("correctness", SKIP, report["skipped"], {"cuda": report["cuda"], "stages": {}})
    print(block(report))
    figures = {"cuda": report["cuda"], "stages": {s["stage"]: s["verdict"] for s in report["stages"]}}
    if report["overall"] != "PASS":
        failed = [s for s in report["stages"] if s["verdict"] != "PASS"]
        first = failed[0]
        return StageResult(
            "correctness",
            FAIL,
            f"{len(failed)} of {len(report['stages'])} stages failed; {first['stage']}: {first['details']}",
            figures,
        )
    return StageResult("correctness", PASS, f"{len(report['stages'])} stages passed on {report['device']}", figures)
