"""Stage 4: staged correctness against the reference (``correctness_worker`` in a subprocess) and its report.

The ``CORRECTNESS_VALIDATION`` block names the stages smoke, shape_sweep, numerical_stability, determinism and
edge_cases (and samples, the input sets of ``validate --samples``), each PASSED or FAILED, then ``overall:
PASSED|FAILED``."""

from __future__ import annotations

from tools.kernelgen.validate.report import FAIL
from tools.kernelgen.validate.report import PASS
from tools.kernelgen.validate.report import SKIP
from tools.kernelgen.validate.report import StageResult
from tools.kernelgen.validate.report import Target
from tools.kernelgen.validate.workers import WorkerFailed
from tools.kernelgen.validate.workers import run_worker

WORKER = "tools.kernelgen.validate.correctness_worker"
AS_COMPILED_OPTION = "--as-compiled"  # the worker runs a hand-written kernel as compiled Triton would
PASSED = "PASSED"
STAGE_WIDTH = len("numerical_stability")


def block(report: dict) -> str:
    lines = ["CORRECTNESS_VALIDATION", f"device: {report['device']}"]
    for stage in report["stages"]:
        lines.append(
            f"stage: {stage['stage']:<{STAGE_WIDTH}} verdict: {stage['verdict']:<6} details: {stage['details']}"
        )
    lines.append(f"overall: {report['overall']}")
    return "\n".join(lines)


def result_of(report: dict) -> StageResult:
    """The stage's result from a worker report (a stage whose kernel raised makes the run a crash; a sampler's input
    set that broke the kernel is a failed set, counted in ``samples_failed``, not a crash)."""
    if "skipped" in report:  # a kernel that cannot run on this machine (TileLang without a GPU)
        return StageResult("correctness", SKIP, report["skipped"], {"cuda": report["cuda"], "stages": {}})
    figures = {
        "cuda": report["cuda"],
        "stages": {s["stage"]: s["verdict"] for s in report["stages"]},
        "report": report,
    }
    if report["overall"] != PASSED:
        failed = [s for s in report["stages"] if s["verdict"] != PASSED]
        first = failed[0]
        return StageResult(
            "correctness",
            FAIL,
            f"{len(failed)} of {len(report['stages'])} stages failed; {first['stage']}: {first['details']}",
            figures,
            crashed=any(s.get("raised") for s in failed),
        )
    return StageResult("correctness", PASS, f"{len(report['stages'])} stages passed on {report['device']}", figures)


def run(target: Target) -> StageResult:
    extra = (f"--samples={target.samples}",) if target.samples else ()
    if not target.recorded:
        extra += (AS_COMPILED_OPTION,)  # a hand-written kernel: under the interpreter, run as compiled Triton runs it
    try:
        report = run_worker(WORKER, target, "correctness.json", extra=extra)
    except WorkerFailed as error:
        return StageResult("correctness", FAIL, f"the correctness run crashed: {error}", crashed=True)
    if "skipped" not in report:
        print(block(report))
    return result_of(report)
