"""``python -m tools.kernelgen validate NAME``: prove a generated kernel is clean, pure, tested, correct and fast.

Stages, in order, stopping at the first hard failure (exit 1): checkstyle (ruff) -> purity (AST rules) -> unit
tests (the kernel's pytest file) -> correctness (staged comparison with the reference, in a subprocess) ->
performance (GPU only). Bad input (unknown kernel, not a checkout) is one line on stderr and exit 2. Each run
appends a row to ``<workspace>/iterations.tsv`` and rewrites ``<workspace>/summary.md``.

This module stays light: the stages import ruff wrappers, torch and the kernel lazily.
"""

from __future__ import annotations

from pathlib import Path

from tools.kernelgen.knowledge import knowledge_kernels

EXIT_FAILED = 1


class ValidateError(ValueError):
    """Bad input to ``validate``: unknown kernel, not a checkout, conflicting options."""


def open_target(name: str, repo_path: str | None, workspace: str | None):
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.layout import kernel_paths
    from tools.kernelgen.layout import record_path
    from tools.kernelgen.profile import ProfileError
    from tools.kernelgen.record import read_record
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.validate.report import Target
    from tools.kernelgen.validate.workspace import default_workspace

    check_kernel_name(name)
    repo = LigerRepo.open(repo_path)
    record = record_path(name)
    paths = kernel_paths(name)
    if not repo.exists(record):
        if repo.exists(paths["ops"]):
            raise ValidateError(
                f"'{name}' has no generation record {record} in {repo.root}: validate needs the profile it was "
                f"generated from (regenerate with `python -m tools.kernelgen new {name} --force`)"
            )
        raise ValidateError(
            f"no kernel '{name}' in {repo.root} ({record} is missing); "
            f"generate it first: python -m tools.kernelgen new {name}"
        )
    try:
        profile = read_record(repo.root, name)
    except ProfileError as error:
        raise ValidateError(str(error)) from None
    if profile.operation_name != name:
        raise ValidateError(f"{record} is the record of '{profile.operation_name}', not '{name}'")
    folder = Path(workspace).resolve() if workspace else default_workspace(repo.root, name)
    folder.mkdir(parents=True, exist_ok=True)
    return Target(repo=repo, name=name, paths=paths, profile=profile, workspace=folder)


def run_stages(target, skip_tests: bool) -> list:
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

    stages = [
        ("checkstyle", checkstyle.run),
        ("purity", purity_stage.run),
        ("unit tests", unit_tests),
        ("correctness", correctness_stage),
        ("performance", lambda target: performance.run(target, cuda["value"])),
    ]
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
) -> int:
    from tools.kernelgen.knowledge import archive as archive_kernel
    from tools.kernelgen.validate.workspace import append_iteration
    from tools.kernelgen.validate.workspace import status
    from tools.kernelgen.validate.workspace import write_summary

    if archive and skip_tests:
        raise ValidateError("--archive needs every stage, the unit tests included: drop --skip-tests")
    target = open_target(name, repo, workspace)
    print(f"kernelgen validate '{target.name}' in {target.repo.root} (workspace {target.workspace})", flush=True)
    results = run_stages(target, skip_tests)
    passed = not any(result.failed for result in results)
    iteration = append_iteration(target.workspace, results, focus, description)
    notes = []
    if archive and not passed:
        notes.append("Not archived: a stage failed.")
    summary = write_summary(target, results, iteration, notes)
    print("=" * 70)
    print(f"validate {target.name}: {status(results).upper()} (iteration {iteration}; summary: {summary})")
    if archive:
        if passed:
            destination = archive_kernel(target.repo.root, target.name, summary)
            print(f"archived to {destination.relative_to(target.repo.root)}/")
        else:
            print("archive: skipped (a stage failed)")
    return 0 if passed else EXIT_FAILED


__all__ = ["ValidateError", "knowledge_kernels", "run"]
