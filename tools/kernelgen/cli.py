"""Command line: ``python -m tools.kernelgen {new,analyze,references,modify,validate,tune,audit,...} ...``.

Every failure the user can cause ends in one line on stderr naming what and where, and exit status 2;
nothing is written unless the whole change set is good.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys

from pathlib import Path

from tools.kernelgen import __version__

EXIT_USAGE = 2
ALL_FILES = "*"  # --ours / --theirs without FILE (modify.ALL_FILES)
CONFLICT_SUFFIX = ".conflicted"  # --conflicts=markers: where a conflicted file's merge goes (no module imports it)


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
    add_backend_option(parser)


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    from tools.kernelgen.profile import BACKENDS

    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="kernel language of the ops file (default: the profile's, else triton); tilelang: tier-1 kernels, "
        'needs the optional extra: pip install -e ".[tilelang]"',
    )


def add_modify_options(parser: argparse.ArgumentParser) -> None:
    """How ``--modify`` settles conflicts (generated kernels) and how far it goes (hand-written kernels)."""
    parser.add_argument(
        "--conflicts",
        choices=("stop", "markers"),
        default="stop",
        help="on a conflict: stop and write nothing (default), or write each conflicted file's merge with git-style "
        f"conflict markers beside it as FILE{CONFLICT_SUFFIX} (not importable; nothing else is written until a "
        "clean --modify)",
    )
    for side, words in (("ours", "the hand edit"), ("theirs", "kernelgen's new text")):
        parser.add_argument(
            f"--{side}",
            metavar="FILE",
            nargs="?",
            const=ALL_FILES,
            action="append",
            help=f"settle the conflicts of FILE (repeatable; every file without FILE) with {words}, as git merge does",
        )
    parser.add_argument(
        "--tests-only",
        action="store_true",
        help="hand-written kernel: append the new reference's test cases alone, without changing the kernel",
    )


def _sides(args, repo) -> dict[str, str]:
    """``--ours``/``--theirs`` as ``{repository-relative path or ALL_FILES: side}``."""
    sides: dict[str, str] = {}
    for side in ("ours", "theirs"):
        for given in getattr(args, side, None) or []:
            path = given
            if given != ALL_FILES:
                candidate = Path(given)
                if candidate.is_absolute() and candidate.resolve().is_relative_to(repo.root):
                    candidate = candidate.resolve().relative_to(repo.root)
                path = candidate.as_posix()
            if sides.get(path, side) != side:
                raise CliError(f"--ours and --theirs both name {given}")
            sides[path] = side
    return sides


def check_output_path(path: str | None, option: str) -> None:
    """A file the command will write outside the checkout (``-o``, ``--save-profile``), checked before any work."""
    if path:
        from tools.kernelgen.writer import check_writable

        problem = check_writable(Path(path))
        if problem:
            raise CliError(f"{option} {path}: {problem}; nothing written")


def profile_file(path: str | None, profile) -> dict[str, str]:
    """``--save-profile``: the profile the command used, as one more file of its all-or-nothing write."""
    if not path:
        return {}
    from tools.kernelgen.profile import dump_yaml

    return {str(Path(path).resolve()): dump_yaml(profile)}


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
    new.add_argument(
        "--force",
        action="store_true",
        help="regenerate an existing generated kernel's files that nobody edited (never a hand-written file)",
    )
    new.add_argument(
        "--force-new",
        action="store_true",
        help="generate even when an existing kernel computes the reference at some option values (by default new "
        "names that kernel and its call, and writes nothing)",
    )
    new.add_argument(
        "--modify", action="store_true", help="update the existing kernel in place, keeping hand edits (3-way merge)"
    )
    new.add_argument(
        "--fused-linear",
        action="store_true",
        help="a loss (tier 3): also generate fused_linear_NAME, the loss of hidden @ weight.T + bias in row chunks",
    )
    add_modify_options(new)

    analyze = commands.add_parser(
        "analyze",
        help="trace a reference, classify it and write its kernel profile",
        description="Analyze a reference; stop here to review/edit the profile, then `new NAME --profile FILE`.",
    )
    analyze.add_argument("reference", metavar="REF", help="built-in name, file.py, file.py:Symbol, or - (stdin)")
    analyze.add_argument("-o", "--output", metavar="FILE", help="write the profile YAML here (default: stdout)")
    analyze.add_argument("--name", help="kernel name (default: from the reference)")
    add_backend_option(analyze)

    commands.add_parser("references", help="list the built-in references")

    export = commands.add_parser(
        "export-baseline",
        help="write the library (src/) of a git revision to a folder, for validate --baseline PATH elsewhere",
        description="Export src/ at git revision REV into DIR (new or empty) for `validate NAME --baseline DIR` on a "
        "machine without this checkout's git history.",
    )
    export.add_argument("revision", metavar="REV", help="git revision (HEAD~3, a tag, a commit)")
    export.add_argument("directory", metavar="DIR", help="folder to write (must not exist, or be empty)")
    export.add_argument("--repo", metavar="PATH", help="Liger checkout whose history to read (default: this one)")
    export.add_argument("--kernel", metavar="NAME", help="check that kernel NAME exists at REV")

    validate = commands.add_parser(
        "validate",
        help="check a kernel, generated or hand-written: checkstyle, purity, unit tests, correctness, performance",
        description="Validate any kernel of the checkout against a PyTorch reference (--reference, else its generation "
        "record, else the built-in reference of its name); exit 0 when every stage passes, 1 when one fails.",
    )
    validate.add_argument("name", help="kernel name: src/liger_kernel/ops/NAME.py")
    validate.add_argument("--repo", metavar="PATH", help="Liger checkout holding the kernel (default: this one)")
    validate.add_argument(
        "--reference",
        metavar="REF",
        help="PyTorch reference to check against (built-in name, file.py, file.py:Symbol, or - for stdin); its "
        "arguments are matched to the kernel's functional by name",
    )
    validate.add_argument(
        "--workspace", metavar="DIR", help="where iterations.tsv and summary.md go (default: .kernelgen-work/NAME/)"
    )
    validate.add_argument("--skip-tests", action="store_true", help="skip the unit-test stage")
    validate.add_argument(
        "--archive",
        action="store_true",
        help="when every stage passes, copy profile, ops file and summary to the skill's knowledge/NAME/",
    )
    validate.add_argument(
        "--baseline",
        metavar="REV|PATH",
        help="also compare speed and peak memory (forward, backward, full; the benchmark's shapes; GPU) with the "
        "same kernel at git revision REV or in the checkout or export-baseline folder PATH",
    )
    validate.add_argument(
        "--smoke",
        action="store_true",
        help="run the --baseline comparison at the benchmark's smoke shapes, on the CPU too (checks the plumbing)",
    )
    validate.add_argument(
        "--ncu",
        action="store_true",
        help="profile each kernel of one step with Nsight Compute (GPU, ncu on PATH): bottleneck, memory and compute "
        "throughput, occupancy; one skip line where it cannot",
    )
    validate.add_argument(
        "--samples",
        metavar="FILE",
        help="a test-case sampler (sample_inputs.py: sample_inputs(device, dtype) -> input sets) whose sets the "
        "correctness stages also check, counted as samples_passed / samples_failed",
    )
    validate.add_argument(
        "--report", metavar="FILE", help="also write this run as JSON: stages, verdicts, figures, artifacts"
    )
    validate.add_argument("--focus", default="validate", help="iterations.tsv 'focus' column (what this try changed)")
    validate.add_argument("--description", default="", help="iterations.tsv 'description' column (default: verdicts)")

    tune = commands.add_parser(
        "tune",
        help="GPU: sweep a generated kernel's tiling, check and time each candidate, keep the best in its profile",
        description="Tune the launch settings (the profile's tiling section) of a generated kernel on a GPU: each "
        "candidate is rendered from the kernel's record, checked (purity, correctness stages) and timed in a scratch "
        "copy; iterations.tsv gets one row per candidate (accept/reject/crash), phase_4_summary.md the outcome, "
        "kernel_function_best.py the best ops file, tuned_profile.yaml the profile change. Without a GPU: one SKIP "
        "line, nothing written, exit 0.",
    )
    tune.add_argument("name", help="kernel name (a kernel kernelgen generated in this checkout: it has a record)")
    tune.add_argument("--repo", metavar="PATH", help="Liger checkout holding the kernel (default: this one)")
    tune.add_argument(
        "--workspace", metavar="DIR", help="where iterations.tsv and the results go (default: .kernelgen-work/NAME/)"
    )
    tune.add_argument("--budget", type=int, default=16, metavar="N", help="at most N candidates, the start included")
    tune.add_argument(
        "--patience", type=int, default=6, metavar="K", help="stop after K candidates in a row without an improvement"
    )
    tune.add_argument(
        "--min-gain",
        type=float,
        default=0.02,
        metavar="F",
        help="a candidate is accepted when it is faster than the best by more than this fraction (default 0.02)",
    )
    tune.add_argument("--ncu", action="store_true", help="profile the best candidate with Nsight Compute at the end")
    tune.add_argument(
        "--no-apply",
        action="store_true",
        help="leave tuned_profile.yaml and the command that applies it; do not regenerate the kernel",
    )

    modify = commands.add_parser(
        "modify",
        help="update an existing kernel in place, keeping hand edits (same as new NAME --modify)",
        description="Three-way merge a new profile into a generated kernel; give a hand-written one the new "
        "hyper-parameters of a new reference (targeted edits) and test cases for them.",
    )
    add_kernel_options(modify)
    add_modify_options(modify)
    add_workflow_commands(commands)
    add_patch_command(commands)
    return parser


def add_patch_command(commands) -> None:
    patch = commands.add_parser(
        "patch",
        help="map a Hugging Face model's blocks to Liger kernels and write apply_liger_kernel_to_<model> with tests",
        description="Find the blocks of a transformers model Liger could serve (norms, the MLP's activation, the rotary "
        "embedding, the causal LM loss), map each to a kernel of the target with its options (the variant search of "
        "new, checked on a mini model), print the table, and write apply_liger_kernel_to_MODEL, its model-type table "
        "entry and a convergence test; a model the target already patches is checked, and nothing is written.",
    )
    patch.add_argument("model", metavar="MODEL", help="transformers model type (qwen3, gemma3_text) or modeling_X.py")
    patch.add_argument("--repo", metavar="PATH", help="Liger checkout to write into (default: this one)")
    patch.add_argument("--dry-run", action="store_true", help="print the table and the diff; write nothing")
    step = commands.add_parser(
        "patch-step",
        help="GPU: one training step of a model patched by its apply function against the unpatched one",
        description="Median time and peak memory of forward + backward + optimizer step, unpatched and patched by the "
        "target's apply_liger_kernel_to_MODEL, each from the same seed: the mini config patch tests with, or the "
        "model type's full-size config with one decoder layer. Without a GPU: one SKIP line, exit 0.",
    )
    step.add_argument("model", metavar="MODEL", help="transformers model type the target has an apply function for")
    step.add_argument("--repo", metavar="PATH", default=".", help="the Liger checkout (default: this one)")
    step.add_argument("--size", choices=("mini", "full"), default="mini")
    step.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    step.add_argument("--batch", type=int, default=8)
    step.add_argument("--length", type=int, default=512)
    step.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: try the plumbing only")
    patch.add_argument(
        "--generate",
        action="store_true",
        help="first generate, through new, the kernels the table says to GENERATE (from the references patch writes "
        "under .kernelgen-work/patch/), then map and write the patch with them",
    )
    patch.add_argument(
        "--force",
        action="store_true",
        help="write the apply function again where patch wrote it before (after new generated a missing kernel)",
    )


def add_workflow_commands(commands) -> None:
    """The commands the skill's agentic workflow runs beside new/validate: its workspace, knowledge retrieval, the
    test-case sampler's check and the audit."""
    samples = commands.add_parser(
        "samples",
        help="check a test-case sampler (sample_inputs.py) against a kernel profile before the kernel exists",
        description="Import FILE, call its sample_inputs(device, dtype), check every input set against the profile's "
        "inputs, parameters and hyper-parameters (names, device, dtype, shapes) and run the reference on it.",
    )
    samples.add_argument(
        "file", metavar="FILE", help="the sampler: a Python file defining sample_inputs(device, dtype)"
    )
    samples.add_argument("--profile", metavar="FILE", required=True, help="the kernel profile the sets are for")

    workspace = commands.add_parser(
        "workspace",
        help="create a workflow run's workspace .kernelgen-work/NAME/ and its request.json (what the audit checks)",
        description="Record the request of a workflow run: the kernel name, the reference file and its sha256, "
        "whether a backward is wanted, framework and backend; refuses to replace another request without --force.",
    )
    workspace.add_argument("name", help="kernel name, snake_case")
    workspace.add_argument("--reference", metavar="REF", required=True, help="file.py, file.py:Symbol or a built-in")
    workspace.add_argument(
        "--backward", choices=("yes", "no"), default="yes", help="whether a backward is wanted (default: yes)"
    )
    workspace.add_argument(
        "--backend", default="triton", help="kernel language, as `new --backend` takes it: triton (default) or tilelang"
    )
    workspace.add_argument("--workspace", metavar="DIR", help="the folder (default: .kernelgen-work/NAME/)")
    workspace.add_argument("--repo", metavar="PATH", help="Liger checkout (default: this one)")
    workspace.add_argument("--force", action="store_true", help="replace a request for another reference")

    knowledge = commands.add_parser(
        "knowledge",
        help="list the archived kernels, or name the one closest to a reference (same tier, most shared ops)",
        description="Knowledge retrieval: without REF, every kernel `validate --archive` kept; with REF, the "
        "archived kernels closest to it and their files.",
    )
    knowledge.add_argument("reference", metavar="REF", nargs="?", help="file.py, file.py:Symbol or a built-in")
    knowledge.add_argument("--name", help="kernel name (default: from the reference)")
    knowledge.add_argument("--repo", metavar="PATH", help="Liger checkout whose archive to read (default: this one)")

    audit = commands.add_parser(
        "audit",
        help="audit a workflow run: static checks of the workspace and the kernel, then validate again and compare",
        description="Print the audit checklist of kernel NAME's workflow run, then AUDIT_PASSED, or AUDIT_FAILURE / "
        "RUNTIME_FAILURE blocks naming each failed check and the phase to redo; exit 0 passed, 1 failed.",
    )
    audit.add_argument("name", help="kernel name")
    audit.add_argument("--workspace", metavar="DIR", help="the run's workspace (default: .kernelgen-work/NAME/)")
    audit.add_argument("--report", metavar="FILE", help="the ORCHESTRATOR_REPORT whose claims to check")
    audit.add_argument("--repo", metavar="PATH", help="Liger checkout holding the kernel (default: this one)")
    audit.add_argument("--static", action="store_true", help="the static checks only (no validate re-run)")


def with_backend(profile, backend: str | None):
    """``profile`` with the kernel language ``--backend`` asks for (None: the profile's own)."""
    if backend is not None:
        profile.backend = backend
    return profile


def check_backend(profile) -> None:
    """Refuse, before anything is written, kernels in a language whose package is not installed."""
    from tools.kernelgen.backends import missing_backend

    problem = missing_backend(profile.backend)
    if problem:
        raise CliError(f"{problem}; nothing written")


def _profile_for_new(args):
    from tools.kernelgen.profile import load_profile

    if args.profile:
        profile = load_profile(args.profile)
        if profile.operation_name != args.name:
            profile = profile.renamed(args.name)
        return with_backend(profile, args.backend)
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

    root = Path(args.repo).resolve() if args.repo else None
    return with_backend(analyze_for_checkout(reference, name=args.name, repo_root=root), args.backend)


def cmd_new(args) -> int:
    from tools.kernelgen.checkout_lock import checkout_lock
    from tools.kernelgen.generate import check_new_target
    from tools.kernelgen.generate import plan_new
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.writer import write_all

    if args.modify:
        return cmd_modify(args)
    if args.tests_only or args.ours or args.theirs or args.conflicts != "stop":
        raise CliError("--tests-only, --ours, --theirs and --conflicts go with --modify (or the modify command)")
    check_kernel_name(args.name)
    check_output_path(args.save_profile, "--save-profile")
    repo = LigerRepo.open(args.repo)
    check_new_target(repo, args.name, force=args.force)  # before the analysis: its advice would not apply
    profile = _profile_for_new(args)
    check_backend(profile)
    if not args.force_new:
        from tools.kernelgen.variants import check_not_variant

        check_not_variant(repo, profile, fused_linear=args.fused_linear)
    if args.fused_linear:
        if profile.tier != 3:
            raise CliError(
                f"--fused-linear: '{args.name}' is tier {profile.tier}; only a loss (tier 3) has a fused linear form"
            )
        profile.fused_linear.enabled = True
    if args.dry_run:
        changes = plan_new(repo, profile, force=args.force)
        sys.stdout.write(changes.diff())
        print(f"kernelgen: dry run, nothing written ({len(changes.changes)} files would change)", file=sys.stderr)
        return 0
    with checkout_lock(repo, f"new {args.name}"):  # planned from the files as they are when written
        check_new_target(repo, args.name, force=args.force)
        changes = plan_new(repo, profile, force=args.force)
        _smoke(repo, profile, changes.changes, from_profile=bool(args.profile))
        write_all(repo.root, {**changes.changes, **profile_file(args.save_profile, profile)}, journal=repo.state_dir())
    print(f"kernelgen: generated '{profile.operation_name}' (tier {profile.tier}) in {repo.root}")
    for remark in role_remarks(profile):
        print(f"  {remark}")
    for path in changes.created:
        print(f"  created   {path}")
    for path in changes.modified:
        print(f"  modified  {path}")
    for path in changes.unchanged:
        print(f"  unchanged {path}")
    tests = [f"test/transformers/test_{profile.operation_name}.py"]
    if profile.fused_linear.enabled:
        tests.append(f"test/transformers/test_{profile.fused_linear_name}.py")
    print(f"next: python -m pytest {' '.join(tests)}")
    return 0


def role_remarks(profile) -> list[str]:
    """The profile's remarks on roles, shapes and the interface the analysis decided (a loss target's class indices
    or probabilities, a norm's weight of one value per column, one argument taken as its two halves)."""
    return [
        remark for remark in profile.notes.remarks if remark.startswith(("role: ", "shape: ", "interface: ", "init: "))
    ]


def _smoke(repo, profile, changes: dict[str, str], from_profile: bool = False) -> None:
    """The generated kernel runs once, from a scratch copy, before anything is written (see ``smoke.py``).
    ``from_profile``: generated from a profile file, whose formulas a person may have edited apart from its
    ``reference.source``, which the run compares against."""
    from tools.kernelgen.smoke import SmokeFailure
    from tools.kernelgen.smoke import skip_reason
    from tools.kernelgen.smoke import smoke_run

    reason = skip_reason(profile)
    if reason is not None:
        print(f"kernelgen: note: no smoke run ({reason}); run its tests", file=sys.stderr)
        return
    try:
        smoke_run(repo.root, profile, changes)
    except SmokeFailure as failure:
        hint = ""
        if from_profile and "differs from the reference's" in str(failure):
            hint = (
                " (the run compares with the profile's reference.source: a formula edited in the profile needs the "
                "same edit there)"
            )
        raise CliError(
            f"the generated '{profile.operation_name}', run once on a tiny CPU input, fails: {failure}{hint}; "
            "nothing written"
        ) from None


def cmd_analyze(args) -> int:
    from tools.kernelgen.analyze import analyze_for_checkout
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.profile import dump_yaml
    from tools.kernelgen.writer import write_all

    if args.name is not None:
        check_kernel_name(args.name)
    check_output_path(args.output, "-o")
    profile = with_backend(analyze_for_checkout(args.reference, name=args.name), args.backend)
    if args.backend:
        profile.validate(f"for {profile.operation_name}")  # a backend the reference cannot have, in one line
    text = dump_yaml(profile)
    if args.output:
        write_all(Path.cwd(), {str(Path(args.output).resolve()): text}, create_dirs=False)
        print(
            f"kernelgen: wrote {args.output} ({profile.operation_name}, tier {profile.tier}: {profile.notes.tier_reason})",
            file=sys.stderr,
        )
        for remark in role_remarks(profile):
            print(f"  {remark}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_patch(args) -> int:
    from tools.kernelgen.checkout_lock import checkout_lock
    from tools.kernelgen.generate import ChangeSet
    from tools.kernelgen.patch import plan_patch
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.writer import write_all

    repo = LigerRepo.open(args.repo)
    plan = plan_patch(args.model, repo, force=args.force)
    if args.generate and not args.dry_run and _generate_missing(repo, plan):
        plan = plan_patch(args.model, repo, force=args.force)  # the new kernels serve their blocks now
    print(plan.table())
    if plan.existing is not None:
        missed = [name for name, found in plan.misses.items() if found]
        verdict = f"misses {', '.join(missed)}" if missed else "serves every block the target has a kernel for"
        print(f"kernelgen: {plan.existing} exists and {verdict}; nothing written")
        return 0
    if not plan.changes:
        raise CliError(f"no block of {args.model} is one the target's kernels compute; nothing written")
    changes = ChangeSet(plan.changes, {path: repo.read(path) if repo.exists(path) else None for path in plan.changes})
    if args.dry_run:
        sys.stdout.write(changes.diff())
        print(f"kernelgen: dry run, nothing written ({len(changes.changes)} files would change)", file=sys.stderr)
        return 0
    with checkout_lock(repo, f"patch {args.model}"):
        write_all(repo.root, changes.changes, journal=repo.state_dir())
    print(f"kernelgen: wrote {plan.function} in {repo.root}")
    for path in changes.created:
        print(f"  created   {path}")
    for path in changes.modified:
        print(f"  modified  {path}")
    generate = [row for row in plan.rows if row.status == "generate"]
    if generate:
        print(f"kernelgen: {len(generate)} block(s) need a kernel the target lacks: GENERATE them (commands above)")
    print(f"next: python -m pytest test/convergence/test_mini_{plan.model_type}.py")
    return 0


def _generate_missing(repo, plan) -> list[str]:
    """``new`` for each block the table says to GENERATE, from the reference patch wrote for it (each kernel is
    written whole or not at all; a failure names the kernels generated before it). The kernels' names, returned."""
    from tools.kernelgen.patch import reference_entry
    from tools.kernelgen.patch import reference_path
    from tools.kernelgen.validate.workspace import ignore_work_dir
    from tools.kernelgen.writer import write_all

    generated = []
    for row in plan.rows:
        if row.status != "generate":
            continue
        path = reference_path(plan.model_type, row)
        write_all(repo.root, {path: row.reference})
        ignore_work_dir(repo.root / path)
        reference = f"{repo.root / path}:{reference_entry(row)}"
        arguments = build_parser().parse_args(["new", row.kernel, "--reference", reference, "--repo", str(repo.root)])
        try:
            cmd_new(arguments)
        except user_errors() as error:
            before = f" (generated before it: {', '.join(generated)})" if generated else ""
            message = (str(error).splitlines() or [type(error).__name__])[0]
            raise CliError(
                f"--generate: new {row.kernel} failed: {message}{before}; the patch is not written"
            ) from None
        generated.append(row.kernel)
    return generated


def cmd_patch_step(args) -> int:
    from tools.kernelgen.patch.step import compare

    options = {"size": args.size, "dtype": args.dtype, "batch": args.batch, "length": args.length}
    for line in compare(args.model, args.repo, device=args.device, **options):
        print(line)
    return 0


def cmd_references(args) -> int:
    from tools.kernelgen.analyze.references import list_builtin_references

    for name in list_builtin_references():
        print(name)
    return 0


def cmd_modify(args) -> int:
    from tools.kernelgen.checkout_lock import checkout_lock
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.modify import ModifyError
    from tools.kernelgen.repo import LigerRepo

    if getattr(args, "force", False):
        raise ModifyError("--modify merges into the existing files; --force (overwrite them) cannot go with it")
    if getattr(args, "force_new", False):
        raise ModifyError("--modify changes the existing kernel; --force-new (generate another) cannot go with it")
    check_kernel_name(args.name)
    check_output_path(args.save_profile, "--save-profile")
    repo = LigerRepo.open(args.repo)
    with checkout_lock(repo, f"modify {args.name}"):  # from reading the kernel's files to writing them
        return _modify_locked(args, repo)


def _modify_locked(args, repo) -> int:
    from tools.kernelgen.modify import EXIT_CONFLICT
    from tools.kernelgen.modify import plan_modify
    from tools.kernelgen.modify import profile_for_modify
    from tools.kernelgen.modify import verify_plan
    from tools.kernelgen.writer import write_all

    sides = _sides(args, repo)
    profile = profile_for_modify(repo, args.name, profile_path=args.profile, reference=args.reference)
    if profile.operation_name != args.name:
        profile = profile.renamed(args.name)
    profile = with_backend(profile, args.backend)
    check_backend(profile)
    plan = plan_modify(repo, args.name, profile, sides=sides, tests_only=args.tests_only)
    if plan.verify is not None and not plan.conflicted:
        verify_plan(repo, plan)  # before anything is reported as done: a failed check writes nothing
    markers = plan.conflicted and args.conflicts == "markers"
    if plan.conflicted and not markers:
        mode = " (conflicts: none of this is written)"
    elif markers and not args.dry_run:
        mode = f" (conflicts: only the merges with markers are written, as FILE{CONFLICT_SUFFIX})"
    else:
        mode = " (dry run)" if args.dry_run else ""
    print(f"kernelgen: modify '{args.name}' in {repo.root}{mode}")
    sys.stdout.write(plan.report_text())
    for warning in plan.warnings:
        print(f"kernelgen: WARNING: {warning}", file=sys.stderr)
    if plan.conflicted:
        sys.stdout.write(plan.conflict_text())
        sys.stdout.flush()
        files = len(plan.conflicted)
        without_markers = [report.path for report in plan.conflicted if not report.conflicts]
        if not markers or without_markers:
            reason = f" ({without_markers[0]} has no conflict to mark: the merge does not compile)" if markers else ""
            print(
                f"kernelgen: {plan.conflict_count} conflict(s) in {files} file(s); nothing written{reason}. Settle "
                f"them with --ours/--theirs [FILE], write them with --conflicts=markers, or reconcile the hand edits "
                f"shown above with the new profile, then run --modify again",
                file=sys.stderr,
            )
            return EXIT_CONFLICT
    written = dict(plan.changes.changes)
    if markers:
        # Markers in a module would keep the package from importing (every kernel's tests with it): each merge goes
        # beside its file, and nothing else is written (a half-applied change set would not fit together either).
        written = {f"{report.path}{CONFLICT_SUFFIX}": report.merged_text for report in plan.conflicted}
    if args.dry_run:
        sys.stdout.write(plan.changes.diff())
        print(f"kernelgen: dry run, nothing written ({len(written)} files would change)", file=sys.stderr)
        return 0
    if written or args.save_profile:
        write_all(repo.root, {**written, **profile_file(args.save_profile, profile)}, journal=repo.state_dir())
    if markers:
        paths = ", ".join(written)
        print(
            f"kernelgen: {plan.conflict_count} conflict(s) marked <<<<<<< current / >>>>>>> kernelgen in {paths} "
            f"(beside the files, which are unchanged and import as before; nothing else written). Resolve each, move "
            f"it over its file, then run the same --modify again (a conflict resolved to the hand edit alone, without "
            f"kernelgen's new line, conflicts again: add --ours FILE for it)",
            file=sys.stderr,
        )
        return EXIT_CONFLICT
    print(f"kernelgen: wrote {len(written)} file(s)" if written else "kernelgen: nothing to change")
    # Merges an earlier --conflicts=markers wrote beside files this change has now written: left for the person (it
    # may hold their resolution), named so that it is not mistaken for pending work.
    stale = [f"{path}{CONFLICT_SUFFIX}" for path in written if (repo.root / f"{path}{CONFLICT_SUFFIX}").exists()]
    if stale:
        print(
            f"kernelgen: {', '.join(stale)} (an earlier --conflicts=markers merge) is stale now that its file is "
            "written: remove it",
            file=sys.stderr,
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
        reference=args.reference,
        baseline=args.baseline,
        smoke=args.smoke,
        profile_ncu=args.ncu,
        samples=args.samples,
        report=args.report,
    )


def cmd_tune(args) -> int:
    from tools.kernelgen.tune import run

    return run(
        args.name,
        repo=args.repo,
        workspace=args.workspace,
        budget=args.budget,
        patience=args.patience,
        min_gain=args.min_gain,
        profile_ncu=args.ncu,
        apply=not args.no_apply,
    )


def cmd_samples(args) -> int:
    from tools.kernelgen.profile import load_profile
    from tools.kernelgen.validate.samples import SamplerError
    from tools.kernelgen.validate.samples import check_sampler_file
    from tools.kernelgen.validate.samples import default_device

    profile = load_profile(args.profile)
    try:
        lines = check_sampler_file(args.file, profile)
    except SamplerError as error:
        raise CliError(str(error)) from None
    print(
        f"kernelgen: sampler {args.file}: {len(lines)} input set(s) for '{profile.operation_name}' on "
        f"{default_device()} (float32); the reference runs on each"
    )
    print("\n".join(lines))
    return 0


def cmd_workspace(args) -> int:
    from tools.kernelgen.layout import check_kernel_name
    from tools.kernelgen.profile import BACKENDS
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.workflow.request import WorkflowError
    from tools.kernelgen.workflow.request import create_workspace

    check_kernel_name(args.name)
    if args.backend not in BACKENDS:
        raise CliError(f"--backend {args.backend}: this kernelgen generates {', '.join(BACKENDS)}")
    repo = LigerRepo.open(args.repo)
    try:
        folder, request, outcome = create_workspace(
            repo.root,
            args.name,
            args.reference,
            backward=args.backward == "yes",
            backend=args.backend,
            workspace=args.workspace,
            force=args.force,
        )
    except WorkflowError as error:
        raise CliError(str(error)) from None
    print(f"kernelgen: workspace {folder} ({outcome})")
    print(f"  reference {request.reference} sha256 {request.reference_sha256}")
    print(f"  backward {'yes' if request.backward else 'no'}, framework {request.framework}, backend {request.backend}")
    return 0


def cmd_knowledge(args) -> int:
    from tools.kernelgen.analyze import AnalyzeError
    from tools.kernelgen.analyze import analyze_for_checkout
    from tools.kernelgen.analyze.closest import ranked_archived_kernels
    from tools.kernelgen.analyze.load import load_reference
    from tools.kernelgen.knowledge import knowledge_kernels
    from tools.kernelgen.layout import KNOWLEDGE_DIR
    from tools.kernelgen.layout import kernel_paths
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.synth import UnsupportedOpError

    repo = LigerRepo.open(args.repo)
    if args.reference and args.reference != "-":
        # A reference that does not load (no such file, a syntax error, an unknown built-in) is bad input, unlike
        # one that loads and that analysis refuses, which the hand-written profile is for.
        load_reference(args.reference)
    archived = knowledge_kernels(repo.root)
    print(f"archived kernels ({KNOWLEDGE_DIR}/): {', '.join(archived) or 'none'}")
    if not args.reference:
        return 0
    try:
        profile = analyze_for_checkout(args.reference, name=args.name, repo_root=repo.root)
    except (AnalyzeError, UnsupportedOpError) as error:
        # Not bad input here: a reference analysis cannot derive is the backward phase's case.
        print(f"analysis: refused: {str(error).splitlines()[0]}")
        print("closest archived kernel: unknown (no profile to compare); start from a similar built-in's profile")
        return 0
    print(f"analysis: {profile.operation_name}, tier {profile.tier} ({profile.tier_description})")
    ranked = ranked_archived_kernels(profile, repo.root)
    for name, score, shared in ranked[:3]:
        print(f"closest archived kernel: {name} (score {score:.2f}; shared ops: {', '.join(shared)})")
        print(
            f"  files: {KNOWLEDGE_DIR}/{name}/profile.yaml, {KNOWLEDGE_DIR}/{name}/{name}.py, "
            f"{KNOWLEDGE_DIR}/{name}/summary.md"
        )
    if not ranked:
        host = profile.notes.closest_existing_kernel
        print(f"closest archived kernel: none of tier {profile.tier} shares an op")
        if host and repo.exists(kernel_paths(host)["ops"]):
            print(f"closest library kernel: {host} ({kernel_paths(host)['ops']})")
    return 0


def cmd_audit(args) -> int:
    from tools.kernelgen.workflow import audit

    return audit(args.name, repo=args.repo, workspace=args.workspace, report=args.report, static_only=args.static)


def cmd_export_baseline(args) -> int:
    from tools.kernelgen.repo import LigerRepo
    from tools.kernelgen.validate.baseline import BaselineError
    from tools.kernelgen.validate.baseline import export_baseline

    repo = LigerRepo.open(args.repo)
    try:
        commit = export_baseline(repo.root, args.revision, Path(args.directory), args.kernel)
    except BaselineError as error:
        raise CliError(str(error)) from None
    print(f"kernelgen: exported src/ of {args.revision} ({commit[:10]}) to {args.directory}")
    print(f"next, on the GPU machine: python -m tools.kernelgen validate NAME --baseline {args.directory}")
    return 0


COMMANDS = {
    "new": cmd_new,
    "analyze": cmd_analyze,
    "references": cmd_references,
    "patch": cmd_patch,
    "patch-step": cmd_patch_step,
    "modify": cmd_modify,
    "validate": cmd_validate,
    "tune": cmd_tune,
    "export-baseline": cmd_export_baseline,
    "samples": cmd_samples,
    "workspace": cmd_workspace,
    "knowledge": cmd_knowledge,
    "audit": cmd_audit,
}


# Exception types that mean bad input (reported in one line), as opposed to kernelgen bugs: (module, class).
USER_ERRORS = (
    ("tools.kernelgen.analyze", "AnalyzeError"),
    ("tools.kernelgen.generate", "GenerateError"),
    ("tools.kernelgen.insert", "InsertError"),
    ("tools.kernelgen.layout", "KernelNameError"),
    ("tools.kernelgen.modify", "ModifyError"),
    ("tools.kernelgen.patch", "PatchError"),
    ("tools.kernelgen.profile", "ProfileError"),
    ("tools.kernelgen.repo", "RepoError"),
    ("tools.kernelgen.writer", "WriteError"),
    ("tools.kernelgen.synth", "UnsupportedOpError"),
    ("tools.kernelgen.tune", "TuneError"),
    ("tools.kernelgen.variants", "VariantError"),
    ("tools.kernelgen.validate", "ValidateError"),
    ("tools.kernelgen.workflow", "WorkflowError"),
)


def user_errors() -> tuple[type[BaseException], ...]:
    """The classes of ``USER_ERRORS``. A module that cannot be imported here (generation needs libcst, which a GPU
    machine running ``tune`` or ``validate`` may lack) raised nothing, so its class is left out."""
    import importlib

    found: list[type[BaseException]] = [CliError]
    for module, name in USER_ERRORS:
        try:
            found.append(getattr(importlib.import_module(module), name))
        except ImportError:
            continue
    return tuple(found)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, reported as Ctrl-C is (what was written, or that nothing was)."""

    def __init__(self, signum: int):
        super().__init__()
        self.signum = signum


def _raise_terminated(signum, frame):
    from tools.kernelgen.writer import SIGNALS_RECEIVED

    SIGNALS_RECEIVED.append(signum)  # kept where the raise itself may be swallowed (inside a library's import)
    raise Terminated(signum)


@contextlib.contextmanager
def _terminations_as_interrupts():
    """SIGINT, SIGTERM and SIGHUP raise ``Terminated`` inside, noted in ``writer.SIGNALS_RECEIVED`` first (the
    writer holds them itself while it swaps files)."""
    previous = {}
    try:
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                previous[getattr(signal, name)] = signal.signal(getattr(signal, name), _raise_terminated)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        from tools.kernelgen.writer import SIGNALS_RECEIVED

        SIGNALS_RECEIVED.clear()  # one command's (main runs again in one process: the tests')
    except KeyboardInterrupt:  # before any command ran (the writer's import too: it imports json, then re)
        print("kernelgen: interrupted; nothing was written", file=sys.stderr)
        return 128 + signal.SIGINT
    with _terminations_as_interrupts():
        return _run(args)


def _run(args) -> int:
    try:
        from tools.kernelgen.checkout_lock import recover_pending_write
        from tools.kernelgen.repo import default_repo_root

        # Before anything else: a write a killed command left half done is completed (or its staging discarded).
        recover_pending_write(Path(getattr(args, "repo", None) or default_repo_root()))
        return COMMANDS[args.command](args)
    except KeyboardInterrupt as interrupt:
        from tools.kernelgen.writer import written_in_this_process

        written = getattr(interrupt, "paths", None) if getattr(interrupt, "written", False) else None
        written = written or written_in_this_process()
        if written:
            # The signal was held until the swap was complete: the command did all it had to, so it succeeded.
            print(
                f"kernelgen: interrupted after the write had finished: all {len(written)} file(s) were written "
                f"({', '.join(written)}); done",
                file=sys.stderr,
            )
            return 0
        print("kernelgen: interrupted; nothing was written", file=sys.stderr)
        return 128 + getattr(interrupt, "signum", signal.SIGINT)
    except RecursionError:
        if (signum := _swallowed_signal()) is not None:
            print("kernelgen: interrupted; nothing was written", file=sys.stderr)
            return 128 + signum
        # Python's parser and sympy recurse once per nesting level: a formula of thousands of terms runs out.
        print(
            f"kernelgen: error: {args.command}: an expression of the reference or profile is nested too deeply to "
            f"process (RecursionError); give parts of it names (intermediate variables, math.statistics)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except user_errors() as error:
        if (signum := _swallowed_signal()) is not None:
            # A signal a library swallowed left it half done (torch half imported): the error is the signal's.
            print("kernelgen: interrupted; nothing was written", file=sys.stderr)
            return 128 + signum
        # Every user error is one line (a profile's problems are joined with "; "): keep it that way on screen.
        message = (str(error).splitlines() or [type(error).__name__])[0]
        print(f"kernelgen: error: {message}", file=sys.stderr)
        return EXIT_USAGE


def _swallowed_signal() -> int | None:
    """A signal received while the command ran whose raise never reached it (nothing was written since: the
    writer refuses to start after one)."""
    from tools.kernelgen.writer import signal_received
    from tools.kernelgen.writer import written_in_this_process

    return signal_received() if not written_in_this_process() else None
