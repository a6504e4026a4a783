"""``python -m tools.kernelgen validate NAME``: prove a kernel, generated or hand-written, is clean, pure, tested,
correct and fast.

Stages, in order, stopping at the first hard failure (exit 1): checkstyle (ruff) -> purity (AST rules; a WARN in a
hand-written kernel) -> unit tests (the kernel's pytest file) -> correctness (staged comparison with the reference,
in a subprocess) -> with ``--ncu``, Nsight Compute's per-kernel figures (GPU only; ``ncu.py``) -> performance
(GPU only) -> with ``--baseline``, the comparison with the same kernel at another
revision or checkout (``baseline.py``). The reference is ``--reference``, else the kernel's generation record, else
the built-in reference of its name; a kernel not checked against its own record is called through its functional
with the reference's arguments matched by name (``hostapi``). Bad input (unknown kernel, not a checkout, a
reference whose arguments are not the kernel's, an unusable baseline) is one line on stderr and exit 2. Each run
appends a row to ``<workspace>/iterations.tsv`` (status accept, reject or crash; ``workspace.py``) and rewrites
``<workspace>/summary.md``; ``--report FILE`` also writes the run as JSON (``machine_report.py``) and ``--samples
FILE`` adds a test-case sampler's input sets to the correctness stages (``samples.py``).

This module stays light: the stages import ruff wrappers, torch and the kernel lazily.
"""

from __future__ import annotations

import contextlib

from pathlib import Path

from tools.kernelgen.knowledge import knowledge_kernels

EXIT_FAILED = 1


class ValidateError(ValueError):
    """Bad input to ``validate``: unknown kernel, not a checkout, conflicting options."""


def _reference_profile(repo, name: str, reference: str | None, recorded: bool):
    """The profile to validate against and where it came from: ``--reference``, the record, else the built-in."""
    from tools.kernelgen.analyze import analyze_for_checkout
    from tools.kernelgen.analyze import list_builtin_references
    from tools.kernelgen.profile import ProfileError
    from tools.kernelgen.record import find_record
    from tools.kernelgen.record import read_record
    from tools.kernelgen.record import record_key

    if reference:
        return analyze_for_checkout(reference, name=name, repo_root=repo.root), f"the reference {reference}"
    if recorded:
        try:
            record = record_key(repo.root, name, find_record(repo.root, name))
            return read_record(repo.root, name), f"its generation record {record}"
        except ProfileError as error:
            raise ValidateError(str(error)) from None
    if name in list_builtin_references():
        return analyze_for_checkout(name, name=name, repo_root=repo.root), f"the built-in reference {name}"
    raise ValidateError(
        f"no reference to validate '{name}' against: it has no generation record and no built-in reference has "
        f"that name; pass --reference REF (a PyTorch reference of what it computes)"
    )


def open_target(name: str, repo_path: str | None, workspace: str | None, reference: str | None = None):
    from tools.kernelgen.hostapi import ApiError
    from tools.kernelgen.hostapi import SignatureMismatch
    from tools.kernelgen.hostapi import match_arguments
    from tools.kernelgen.hostapi import read_kernel_api
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.layout import kernel_paths
    from tools.kernelgen.record import find_record
    from tools.kernelgen.record import record_key
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.validate.report import Target
    from tools.kernelgen.validate.workspace import create_workspace
    from tools.kernelgen.validate.workspace import default_workspace

    check_kernel_name(name)
    repo = LigerRepo.open(repo_path)
    found = find_record(repo.root, name)
    record = record_key(repo.root, name, found)
    paths = kernel_paths(name)
    recorded = found is not None
    if not repo.exists(paths["ops"]):
        raise ValidateError(
            f"no kernel '{name}' in {repo.root} ({paths['ops']} is missing); "
            f"generate it first: python -m tools.kernelgen new {name}"
        )
    profile, source = _reference_profile(repo, name, reference, recorded)
    call = None
    grad_names = None
    if recorded and not reference:
        if profile.operation_name != name:
            raise ValidateError(f"{record} is the record of '{profile.operation_name}', not '{name}'")
    else:
        try:
            api = read_kernel_api(repo, name, profile)
            mapping = match_arguments(profile, api.entry)
        except (ApiError, SignatureMismatch) as error:
            raise ValidateError(str(error)) from None
        call = {
            "module": api.entry.module,
            "callable": api.entry.name,
            "by_name": api.entry_is_functional,
            "params": [[p.name, p.default] for p in api.entry.params],
            "tensors": mapping.tensors,
            "hypers": mapping.hypers,
        }
        wanted = {t.name for t in profile.inputs if t.requires_grad} | {p.name for p in profile.parameters}
        grad_names = [entry for ref, entry in mapping.tensors.items() if ref in wanted]
    folder = create_workspace(Path(workspace).resolve() if workspace else default_workspace(repo.root, name))
    return Target(
        repo=repo,
        name=name,
        paths=paths,
        profile=profile,
        workspace=folder,
        call=call,
        reference=source,
        recorded=recorded,
        grad_names=grad_names,
    )


def run_stages(target, skip_tests: bool, baseline=None, smoke: bool = False, profile_ncu: bool = False) -> list:
    from tools.kernelgen.validate import checkstyle
    from tools.kernelgen.validate import correctness
    from tools.kernelgen.validate import performance
    from tools.kernelgen.validate import purity_stage
    from tools.kernelgen.validate import unittests
    from tools.kernelgen.validate.report import SKIP
    from tools.kernelgen.validate.report import StageResult
    from tools.kernelgen.validate.report import header
    from tools.kernelgen.validate.report import verdict_line

    def unit_tests(target):
        if skip_tests:
            return StageResult("unit tests", SKIP, "skipped (--skip-tests)")
        return unittests.run(target)

    cuda = {"value": False}

    def correctness_stage(target):
        result = correctness.run(target)
        cuda["value"] = bool(result.figures.get("cuda"))
        return result

    profiled: dict = {}

    def ncu_stage(target):
        from tools.kernelgen.validate import ncu_stage as stage

        result = stage.run(target, cuda["value"])
        profiled["kernels"] = result.figures.get("kernels")
        return result

    stages = [
        ("checkstyle", checkstyle.run),
        ("purity", purity_stage.run),
        ("unit tests", unit_tests),
        ("correctness", correctness_stage),
        *([("ncu", ncu_stage)] if profile_ncu else []),
        ("performance", lambda target: performance.run(target, cuda["value"], profiled.get("kernels"))),
    ]
    if baseline is not None:
        from tools.kernelgen.validate.baseline import run_stage as baseline_stage

        stages.append(("baseline", lambda target: baseline_stage(target, baseline, cuda["value"], smoke)))
    results = []
    for index, (label, stage) in enumerate(stages, start=1):
        print(header(index, len(stages), label), flush=True)
        result = stage(target)
        results.append(result)
        print(verdict_line(result), flush=True)
        if result.failed:
            break
    return results


def run(
    name: str,
    *,
    repo: str | None = None,
    workspace: str | None = None,
    skip_tests: bool = False,
    archive: bool = False,
    focus: str = "validate",
    description: str = "",
    reference: str | None = None,
    baseline: str | None = None,
    smoke: bool = False,
    profile_ncu: bool = False,
    samples: str | None = None,
    report: str | None = None,
) -> int:
    from tools.kernelgen.knowledge import archive as archive_kernel
    from tools.kernelgen.validate.workspace import append_iteration
    from tools.kernelgen.validate.workspace import first_failure
    from tools.kernelgen.validate.workspace import status
    from tools.kernelgen.validate.workspace import write_summary
    from tools.kernelgen.writer import check_writable
    from tools.kernelgen.writer import write_all

    if archive and skip_tests:
        raise ValidateError("--archive needs every stage, the unit tests included: drop --skip-tests")
    if smoke and not baseline:
        raise ValidateError("--smoke runs the --baseline comparison at the benchmark's smoke shapes: give --baseline")
    if report and check_writable(Path(report)):
        raise ValidateError(f"--report {report}: {check_writable(Path(report))}; nothing run")
    target = open_target(name, repo, workspace, reference)
    if samples:
        target.samples = check_sampler(samples, target.profile)
    if archive and not target.recorded:
        raise ValidateError(f"--archive keeps generated kernels; '{name}' has no generation record (hand-written)")
    with contextlib.ExitStack() as stack:
        against = None
        if baseline:
            from tools.kernelgen.validate.baseline import BaselineError
            from tools.kernelgen.validate.baseline import open_baseline

            try:
                against = stack.enter_context(open_baseline(target.repo.root, baseline, name))
            except BaselineError as error:
                raise ValidateError(str(error)) from None
        print(f"kernelgen validate '{target.name}' in {target.repo.root} (workspace {target.workspace})", flush=True)
        print(f"reference: {target.reference}" + (f"; baseline: {against.label}" if against else ""), flush=True)
        results = run_stages(target, skip_tests, against, smoke, profile_ncu)
    passed = not any(result.failed for result in results)
    iteration = append_iteration(target.workspace, results, focus, description)
    notes = []
    if archive and not passed:
        notes.append("Not archived: a stage failed.")
    summary = write_summary(target, results, iteration, notes)
    print("=" * 70)
    failed = first_failure(results)
    verdict = "PASS" if failed is None else f"FAIL at {failed.stage}"
    print(f"validate {target.name}: {verdict} (iteration {iteration}: {status(results)}; summary: {summary})")
    archived = None
    if archive:
        if passed:
            archived = archive_kernel(target.repo.root, target.name, summary)
            print(f"archived to {archived.relative_to(target.repo.root)}/")
        else:
            print("archive: skipped (a stage failed)")
    if report:
        from tools.kernelgen.validate.machine_report import build_report
        from tools.kernelgen.validate.machine_report import report_text

        options = {"skip_tests": skip_tests, "samples": str(target.samples) if target.samples else None}
        options.update(reference=reference, baseline=baseline, focus=focus, archive=archive, ncu=profile_ncu)
        document = build_report(target, results, iteration, summary, options, archived, Path(report).resolve())
        write_all(Path.cwd(), {str(Path(report).resolve()): report_text(document)}, create_dirs=False)
        print(f"report: {report}")
    return 0 if passed else EXIT_FAILED


def check_sampler(path: str, profile) -> Path:
    """The sampler file, checked on the device the correctness stages use (before any stage runs: bad input is
    one line and nothing run); raises ``ValidateError``."""
    from tools.kernelgen.validate.samples import SamplerError
    from tools.kernelgen.validate.samples import default_device
    from tools.kernelgen.validate.samples import draw_samples

    try:
        draw_samples(path, profile, default_device())
    except SamplerError as error:
        raise ValidateError(str(error)) from None
    return Path(path).resolve()


__all__ = ["ValidateError", "knowledge_kernels", "run"]
