"""``python -m tools.kernelgen validate NAME``: prove a generated kernel is clean, pure, tested, correct and fast.

Stages, in order, stopping at the first hard failure (exit 1): checkstyle (ruff) -> purity (AST rules) -> unit
tests (the kernel's pytest file) -> correctness (staged comparison with the reference, in a subprocess) ->
performance (GPU only). Bad input (unknown kernel, not a checkout) is one line on stderr and exit 2. Each run
appends a row to ``<workspace>/iterations.tsv`` and rewrites ``<workspace>/summary.md``.

This module stays light (argparse only): the stages import ruff wrappers, torch and the kernel lazily.
"""

from __future__ import annotations

import argparse

from pathlib import Path

from tools.kernelgen.validate.knowledge import knowledge_kernels

EXIT_FAILED = 1


class ValidateError(ValueError):
    """Bad input to ``validate``: unknown kernel, not a checkout, conflicting options."""


def register(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "validate",
        help="check a generated kernel: checkstyle, purity, unit tests, correctness, performance",
        description="Validate a generated kernel; exit 0 when every stage passes, 1 when one fails.",
    )
    parser.add_argument("name", help="kernel name, as given to `new` (its record is .kernelgen/NAME.yaml)")
    parser.add_argument("--repo", metavar="PATH", help="Liger checkout holding the kernel (default: this one)")
    parser.add_argument(
        "--workspace", metavar="DIR", help="where iterations.tsv and summary.md go (default: .kernelgen-work/NAME/)"
    )
    parser.add_argument("--skip-tests", action="store_true", help="skip the unit-test stage")
    parser.add_argument(
        "--archive",
        action="store_true",
        help="when every stage passes, copy profile, ops file and summary to the skill's knowledge/NAME/",
    )
    parser.add_argument("--focus", default="validate", help="iterations.tsv 'focus' column (what this try changed)")
    parser.add_argument("--description", default="", help="iterations.tsv 'description' column (default: verdicts)")
    return parser


def open_target(args):
    from tools.kernelgen.generate import check_kernel_name
    from tools.kernelgen.generate import record_path
    from tools.kernelgen.profile import ProfileError
    from tools.kernelgen.profile import load_yaml
    from tools.kernelgen.render import kernel_paths
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.validate.report import Target
    from tools.kernelgen.validate.workspace import default_workspace

    check_kernel_name(args.name)
    repo = LigerRepo.open(args.repo)
    record = record_path(args.name)
    paths = kernel_paths(args.name)
    if not repo.exists(record):
        if repo.exists(paths["ops"]):
            raise ValidateError(
                f"'{args.name}' has no generation record {record} in {repo.root}: validate needs the profile it was "
                f"generated from (regenerate with `python -m tools.kernelgen new {args.name} --force`)"
            )
        raise ValidateError(
            f"no kernel '{args.name}' in {repo.root} ({record} is missing); "
            f"generate it first: python -m tools.kernelgen new {args.name}"
        )
    try:
        profile = load_yaml(repo.read(record), source=record)
    except ProfileError as error:
        raise ValidateError(str(error)) from None
    if profile.operation_name != args.name:
        raise ValidateError(f"{record} is the record of '{profile.operation_name}', not '{args.name}'")
    workspace = Path(args.workspace).resolve() if args.workspace else default_workspace(repo.root, args.name)
    workspace.mkdir(parents=True, exist_ok=True)
    return Target(repo=repo, name=args.name, paths=paths, profile=profile, workspace=workspace)


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


def run(args) -> int:
    from tools.kernelgen.validate.knowledge import archive
    from tools.kernelgen.validate.workspace import append_iteration
    from tools.kernelgen.validate.workspace import status
    from tools.kernelgen.validate.workspace import write_summary

    if args.archive and args.skip_tests:
        raise ValidateError("--archive needs every stage, the unit tests included: drop --skip-tests")
    target = open_target(args)
    print(f"kernelgen validate '{target.name}' in {target.repo.root} (workspace {target.workspace})", flush=True)
    results = run_stages(target, args.skip_tests)
    passed = not any(result.failed for result in results)
    iteration = append_iteration(target.workspace, results, args.focus, args.description)
    notes = []
    if args.archive and not passed:
        notes.append("Not archived: a stage failed.")
    summary = write_summary(target, results, iteration, notes)
    print("=" * 70)
    print(f"validate {target.name}: {status(results).upper()} (iteration {iteration}; summary: {summary})")
    if args.archive:
        if passed:
            destination = archive(target, summary)
            print(f"archived to {destination.relative_to(target.repo.root)}/")
        else:
            print("archive: skipped (a stage failed)")
    return 0 if passed else EXIT_FAILED


__all__ = ["ValidateError", "knowledge_kernels", "register", "run"]
