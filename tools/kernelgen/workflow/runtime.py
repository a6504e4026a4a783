"""The audit's runtime check: run ``validate`` again, as the claimed report says it was run, and compare.

The re-run writes into ``<workspace>/audit/`` (its own ``iterations.tsv``, summary and report), so the workspace
the orchestrator left is not changed. Verdicts must be the same (whichever spelling: ``PASS``/``PASSED``), counts
(unit tests, samples) equal, and performance figures within 10% of the claimed ones. A ``--ncu`` run is re-run
without Nsight Compute: that stage is informational (it never fails validate) and its profile is not re-taken.
"""

from __future__ import annotations

import contextlib
import io

from tools.kernelgen.workflow import artifacts as files
from tools.kernelgen.workflow.artifacts import number
from tools.kernelgen.workflow.artifacts import verdict
from tools.kernelgen.workflow.static_checks import FAIL
from tools.kernelgen.workflow.static_checks import FIGURE_TOLERANCE
from tools.kernelgen.workflow.static_checks import PASS
from tools.kernelgen.workflow.static_checks import Check
from tools.kernelgen.workflow.static_checks import Missing
from tools.kernelgen.workflow.static_checks import Workspace

AUDIT_DIR = "audit"
FIGURES = ("liger_ms", "speedup", "speedup_compile", "peak_mb")
OUTPUT_TAIL = 8
# Stages the re-run leaves out on purpose: their verdicts are not compared.
NOT_RE_RUN = ("ncu",)


def rerun(ws: Workspace, claimed: dict) -> tuple[int, dict | None, str]:
    """``validate`` with the claimed run's options into ``<workspace>/audit/``: exit status, its report, output."""
    from tools.kernelgen.validate import ValidateError
    from tools.kernelgen.validate import run as validate

    options = claimed.get("options") or {}
    folder = ws.path(AUDIT_DIR)
    folder.mkdir(exist_ok=True)
    report = folder / files.VALIDATE_REPORT
    report.unlink(missing_ok=True)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        try:
            status = validate(
                ws.name,
                repo=str(ws.repo.root),
                workspace=str(folder),
                skip_tests=bool(options.get("skip_tests")),
                reference=options.get("reference"),
                # the workspace's sampler (the claimed run's, by validate_passed), wherever the workspace is now
                samples=str(ws.path(files.SAMPLER)) if options.get("samples") else None,
                focus="audit",
                description="audit re-run",
                report=str(report),
            )
        except ValidateError as error:
            return 2, None, str(error)
    return status, files.read_json(report) if report.is_file() else None, output.getvalue()


def compare(claimed: dict, again: dict) -> list[str]:
    """What the re-run says differently from the claimed report, one phrase each."""
    problems = []
    ours = {s["stage"]: verdict(s["verdict"]) for s in claimed.get("stages", []) if s["stage"] not in NOT_RE_RUN}
    theirs = {s["stage"]: verdict(s["verdict"]) for s in again.get("stages", []) if s["stage"] not in NOT_RE_RUN}
    for stage in [*ours, *(s for s in theirs if s not in ours)]:
        if ours.get(stage) != theirs.get(stage):
            problems.append(f"stage {stage}: claimed {ours.get(stage, 'absent')}, re-run {theirs.get(stage, 'absent')}")
    # What ran in both runs is compared in detail; a stage that did not run again is said once, above.
    if claimed.get("correctness") and again.get("correctness"):
        ours_c = {s["stage"]: verdict(s["verdict"]) for s in claimed["correctness"].get("stages", [])}
        theirs_c = {s["stage"]: verdict(s["verdict"]) for s in again["correctness"].get("stages", [])}
        for stage in ours_c:
            if ours_c[stage] != theirs_c.get(stage):
                problems.append(f"correctness {stage}: claimed {ours_c[stage]}, re-run {theirs_c.get(stage, 'absent')}")
        for key in ("samples_passed", "samples_failed"):
            if claimed.get(key) != again.get(key):
                problems.append(f"{key}: claimed {claimed.get(key)}, re-run {again.get(key)}")
    if claimed.get("unit_tests") and again.get("unit_tests"):
        for key in ("passed", "failed"):
            said, seen = claimed["unit_tests"].get(key), again["unit_tests"].get(key)
            if said != seen:
                problems.append(f"unit tests {key}: claimed {said}, re-run {seen}")
    for key in FIGURES:
        said, seen = number(claimed.get(key)), number(again.get(key))
        if said is None and seen is None:
            continue
        if said is None or seen is None or abs(said - seen) > FIGURE_TOLERANCE * max(abs(seen), 1e-12):
            problems.append(f"{key}: claimed {claimed.get(key)}, re-run {again.get(key)} (more than 10% apart)")
    return problems


def check_runtime(ws: Workspace) -> Check:
    try:
        claimed = ws.validate_report
    except Missing as missing:
        return Check("runtime_validate", "4", FAIL, f"nothing to re-run against: {missing}", runtime=True)
    status, again, output = rerun(ws, claimed)
    if again is None:
        tail = " | ".join(output.strip().splitlines()[-OUTPUT_TAIL:])
        return Check("runtime_validate", "4", FAIL, f"the re-run stopped (exit {status}): {tail}", runtime=True)
    problems = compare(claimed, again)
    where = f"re-run in {ws.path(AUDIT_DIR)}"
    if problems:
        return Check("runtime_validate", "4", FAIL, f"{'; '.join(problems)} ({where})", runtime=True)
    figures = ", ".join(f"{k} {again[k]}" for k in FIGURES if again.get(k) is not None) or "no GPU figures"
    return Check(
        "runtime_validate",
        "4",
        PASS,
        f"validate again: {again['status']}, samples {again.get('samples_passed')} passed / "
        f"{again.get('samples_failed')} failed, {figures}; matches {files.VALIDATE_REPORT} ({where})",
        runtime=True,
    )
