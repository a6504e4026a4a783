"""Command line: ``python -m tools.kernelgen {new,analyze,references} ...``.

Every failure the user can cause ends in one line on stderr naming what and where, and exit status 2;
nothing is written unless the whole change set is good.
"""

from __future__ import annotations

import argparse
import sys

from pathlib import Path

from tools.kernelgen import __version__

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(ValueError):
    """A user-facing error raised by the CLI layer itself."""


def add_kernel_options(parser: argparse.ArgumentParser) -> None:
    """NAME and the options ``new`` and ``modify`` share (``modify NAME`` is ``new NAME --modify``)."""
    parser.add_argument("name", help="kernel name, snake_case (e.g. geglu)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--profile", metavar="FILE", help="kernel profile YAML (from `analyze -o`, edited)")
    source.add_argument(
        "--reference", metavar="REF", help="PyTorch reference: built-in name, file.py, file.py:Symbol, or - (stdin)"
    )
    parser.add_argument("--repo", metavar="PATH", help="Liger checkout to change (default: this one)")
    parser.add_argument("--dry-run", action="store_true", help="print the unified diff of every change; write nothing")
    parser.add_argument("--save-profile", metavar="FILE", help="also write the profile used to FILE")


def save_profile(path: str | None, profile) -> None:
    """``--save-profile``: the profile the command used, after the kernel's own files are written."""
    if path:
        from tools.kernelgen.profile import dump_yaml

        Path(path).write_text(dump_yaml(profile), encoding="utf-8")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.kernelgen",
        description="Generate Liger-Kernel Triton kernels from a PyTorch reference.",
    )
    parser.add_argument("--version", action="version", version=f"kernelgen {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    new = commands.add_parser(
        "new",
        help="generate a kernel: ops, module, functional, test, benchmark, registrations",
        description="Generate a kernel. Without --profile/--reference, NAME must be a built-in reference.",
    )
    add_kernel_options(new)
    new.add_argument("--force", action="store_true", help="overwrite the kernel's files if they already exist")
    new.add_argument(
        "--modify", action="store_true", help="update the existing kernel in place, keeping hand edits (3-way merge)"
    )
    new.add_argument(
        "--fused-linear",
        action="store_true",
        help="a loss (tier 3): also generate fused_linear_NAME, the loss of hidden @ weight.T + bias in row chunks",
    )

    analyze = commands.add_parser(
        "analyze",
        help="trace a reference, classify it and write its kernel profile",
        description="Analyze a reference; stop here to review/edit the profile, then `new NAME --profile FILE`.",
    )
    analyze.add_argument("reference", metavar="REF", help="built-in name, file.py, file.py:Symbol, or - (stdin)")
    analyze.add_argument("-o", "--output", metavar="FILE", help="write the profile YAML here (default: stdout)")
    analyze.add_argument("--name", help="kernel name (default: from the reference)")

    commands.add_parser("references", help="list the built-in references")

    validate = commands.add_parser(
        "validate",
        help="check a generated kernel: checkstyle, purity, unit tests, correctness, performance",
        description="Validate a generated kernel; exit 0 when every stage passes, 1 when one fails.",
    )
    validate.add_argument("name", help="kernel name, as given to `new` (its record is .kernelgen/NAME.yaml)")
    validate.add_argument("--repo", metavar="PATH", help="Liger checkout holding the kernel (default: this one)")
    validate.add_argument(
        "--workspace", metavar="DIR", help="where iterations.tsv and summary.md go (default: .kernelgen-work/NAME/)"
    )
    validate.add_argument("--skip-tests", action="store_true", help="skip the unit-test stage")
    validate.add_argument(
        "--archive",
        action="store_true",
        help="when every stage passes, copy profile, ops file and summary to the skill's knowledge/NAME/",
    )
    validate.add_argument("--focus", default="validate", help="iterations.tsv 'focus' column (what this try changed)")
    validate.add_argument("--description", default="", help="iterations.tsv 'description' column (default: verdicts)")

    modify = commands.add_parser(
        "modify",
        help="update an existing kernel in place, keeping hand edits (same as new NAME --modify)",
        description="Three-way merge a new profile into a generated kernel, or add cases to a hand-written one.",
    )
    add_kernel_options(modify)
    return parser


def _profile_for_new(args):
    from tools.kernelgen.profile import load_profile

    if args.profile:
        profile = load_profile(args.profile)
        if profile.operation_name != args.name:
            profile = profile.renamed(args.name)
        return profile
    reference = args.reference
    if reference is None:
        from tools.kernelgen.analyze.references import list_builtin_references

        builtins = list_builtin_references()
        if args.name not in builtins:
            raise CliError(
                f"no reference for '{args.name}': pass --reference REF or --profile FILE "
                f"(built-in references: {', '.join(builtins)})"
            )
        reference = args.name
    from tools.kernelgen.analyze import analyze_for_checkout

    return analyze_for_checkout(reference, name=args.name, repo_root=Path(args.repo).resolve() if args.repo else None)


def cmd_new(args) -> int:
    from tools.kernelgen.generate import plan_new
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.writer import write_all

    if args.modify:
        return cmd_modify(args)
    check_kernel_name(args.name)
    repo = LigerRepo.open(args.repo)
    profile = _profile_for_new(args)
    if args.fused_linear:
        if profile.tier != 3:
            raise CliError(
                f"--fused-linear: '{args.name}' is tier {profile.tier}; only a loss (tier 3) has a fused linear form"
            )
        profile.fused_linear.enabled = True
    changes = plan_new(repo, profile, force=args.force)
    if args.dry_run:
        sys.stdout.write(changes.diff())
        print(f"kernelgen: dry run, nothing written ({len(changes.changes)} files would change)", file=sys.stderr)
        return 0
    write_all(repo.root, changes.changes)
    save_profile(args.save_profile, profile)
    print(f"kernelgen: generated '{profile.operation_name}' (tier {profile.tier}) in {repo.root}")
    for path in changes.created:
        print(f"  created   {path}")
    for path in changes.modified:
        print(f"  modified  {path}")
    tests = [f"test/transformers/test_{profile.operation_name}.py"]
    if profile.fused_linear.enabled:
        tests.append(f"test/transformers/test_{profile.fused_linear_name}.py")
    print(f"next: python -m pytest {' '.join(tests)}")
    return 0


def cmd_analyze(args) -> int:
    from tools.kernelgen.analyze import analyze_for_checkout
    from tools.kernelgen.profile import dump_yaml

    profile = analyze_for_checkout(args.reference, name=args.name)
    text = dump_yaml(profile)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(
            f"kernelgen: wrote {args.output} ({profile.operation_name}, tier {profile.tier}: {profile.notes.tier_reason})",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return 0


def cmd_references(args) -> int:
    from tools.kernelgen.analyze.references import list_builtin_references

    for name in list_builtin_references():
        print(name)
    return 0


def cmd_modify(args) -> int:
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.modify import EXIT_CONFLICT
    from tools.kernelgen.modify import ModifyError
    from tools.kernelgen.modify import plan_modify
    from tools.kernelgen.modify import profile_for_modify
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.writer import write_all

    if getattr(args, "force", False):
        raise ModifyError("--modify merges into the existing files; --force (overwrite them) cannot go with it")
    check_kernel_name(args.name)
    repo = LigerRepo.open(args.repo)
    profile = profile_for_modify(repo, args.name, profile_path=args.profile, reference=args.reference)
    if profile.operation_name != args.name:
        profile = profile.renamed(args.name)
    plan = plan_modify(repo, args.name, profile)
    mode = " (conflicts: none of this is written)" if plan.conflicted else " (dry run)" if args.dry_run else ""
    print(f"kernelgen: modify '{args.name}' in {repo.root}{mode}")
    sys.stdout.write(plan.report_text())
    if plan.conflicted:
        sys.stdout.write(plan.conflict_text())
        sys.stdout.flush()
        files = len(plan.conflicted)
        print(
            f"kernelgen: {plan.conflict_count} conflict(s) in {files} file(s); nothing written. Reconcile the hand "
            f"edits shown above with the new profile (or undo them), then run --modify again",
            file=sys.stderr,
        )
        return EXIT_CONFLICT
    if args.dry_run:
        sys.stdout.write(plan.changes.diff())
        print(f"kernelgen: dry run, nothing written ({len(plan.changes.changes)} files would change)", file=sys.stderr)
        return 0
    if plan.changes.changes:
        write_all(repo.root, plan.changes.changes)
    save_profile(args.save_profile, profile)
    print(
        f"kernelgen: wrote {len(plan.changes.changes)} files"
        if plan.changes.changes
        else "kernelgen: nothing to change"
    )
    return 0


def cmd_validate(args) -> int:
    from tools.kernelgen.validate import run

    return run(
        args.name,
        repo=args.repo,
        workspace=args.workspace,
        skip_tests=args.skip_tests,
        archive=args.archive,
        focus=args.focus,
        description=args.description,
    )


COMMANDS = {
    "new": cmd_new,
    "analyze": cmd_analyze,
    "references": cmd_references,
    "modify": cmd_modify,
    "validate": cmd_validate,
}


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input (reported in one line), as opposed to kernelgen bugs."""
    from tools.kernelgen.analyze import AnalyzeError
    from tools.kernelgen.generate import GenerateError
    from tools.kernelgen.insert import InsertError
    from tools.kernelgen.layout import KernelNameError
    from tools.kernelgen.modify import ModifyError
    from tools.kernelgen.profile import ProfileError
    from tools.kernelgen.repo import RepoError
    from tools.kernelgen.synth import UnsupportedOpError
    from tools.kernelgen.validate import ValidateError
    from tools.kernelgen.writer import WriteError

    return (
        CliError,
        AnalyzeError,
        GenerateError,
        InsertError,
        KernelNameError,
        ModifyError,
        ProfileError,
        RepoError,
        WriteError,
        UnsupportedOpError,
        ValidateError,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("kernelgen: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except user_errors() as error:
        # Every user error is one line (a profile's problems are joined with "; "): keep it that way on screen.
        message = (str(error).splitlines() or [type(error).__name__])[0]
        print(f"kernelgen: error: {message}", file=sys.stderr)
        return EXIT_USAGE
