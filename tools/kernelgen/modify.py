"""``new NAME --modify`` (alias ``modify NAME``): update an existing kernel in place, keeping hand edits.

Kernels kernelgen generated have a record (``record.py``: the profile they were made from). Their
files are three-way merged, line by line: base = the recorded profile rendered again, ours = the file on
disk (with hand edits), theirs = the new profile rendered. The functional wrapper is merged the same way,
on its own text region in ``functional.py``. Registrations are re-run with the inserter (idempotent adds);
names the old profile registered and the new one does not are reported, not deleted.

A conflict stops the command (nothing written, the conflicts shown) unless it is settled per file with
``--ours``/``--theirs`` (``git merge-file``'s sides: the hand edit or kernelgen's new text), or written with git's
markers beside the file (``--conflicts=markers``: ``FILE.conflicted``, which nothing imports); a hand edit that
already contains the new generated lines is not a conflict.

Hand-written kernels (no record) are never rewritten whole. A new reference that adds hyper-parameters is
threaded into their files by targeted AST edits (``retrofit``: the affine math delta kernelgen can derive, the
parameters through the kernels, the wrappers, the autograd Function, the functional and the module); the
reference's cases are appended to the test file as one new test function (the existing tests stay as they are);
registrations are left as the target has them (names it does not export are noted). When the change cannot be
made safely the command says why in one line and writes nothing; ``--tests-only`` then appends the cases alone. Before
anything is written the changed files are staged in a scratch copy where every touched module must import, every
touched test file must collect and the appended cases must pass (with ``--tests-only``: their default case).

Everything is computed in memory; otherwise one all-or-nothing ``writer.write_all``.
"""

from __future__ import annotations

import ast
import copy
import re

from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen import generate
from tools.kernelgen.analyze import analyze_for_checkout
from tools.kernelgen.analyze import list_builtin_references
from tools.kernelgen.formatting import added_lint_findings
from tools.kernelgen.generate import ChangeSet
from tools.kernelgen.generate import compile_problem
from tools.kernelgen.generate import existing_kernel_files
from tools.kernelgen.generate import registration_for
from tools.kernelgen.hostapi import ApiError
from tools.kernelgen.hostapi import SignatureMismatch
from tools.kernelgen.hostapi import match_arguments
from tools.kernelgen.hostapi import read_kernel_api
from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import Registration
from tools.kernelgen.insert import register_kernel
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.layout import check_kernel_name
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.merge import Conflict
from tools.kernelgen.merge import merge3
from tools.kernelgen.modify_tests import CasesError
from tools.kernelgen.modify_tests import append_cases
from tools.kernelgen.modify_tests import case_call
from tools.kernelgen.modify_tests import case_test_name
from tools.kernelgen.modify_tests import unsupported_reason
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import load_profile
from tools.kernelgen.record import content_hash
from tools.kernelgen.record import find_record
from tools.kernelgen.record import has_record
from tools.kernelgen.record import read_record
from tools.kernelgen.record import read_record_text
from tools.kernelgen.record import record_key
from tools.kernelgen.record import record_text
from tools.kernelgen.record import recorded_hashes
from tools.kernelgen.record import written_by_this_version
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.retrofit import RetrofitError
from tools.kernelgen.retrofit import plan_retrofit
from tools.kernelgen.shared_module import SharedModuleError
from tools.kernelgen.shared_module import added_file_reason
from tools.kernelgen.shared_module import shared_module_files
from tools.kernelgen.verify import verify_changes

EXIT_CONFLICT = 1
CONTEXT_LINES = 2
ALL_FILES = "*"  # --ours / --theirs without a file: every file
TEST_HEADER = "import pytest\nimport torch\n"


class ModifyError(ValueError):
    """A kernel that cannot be modified as asked; nothing was written."""


@dataclass
class FileReport:
    """What ``--modify`` does to one file, and why."""

    path: str
    status: str  # merged, updated, resolved, threaded, created, registered, appended, unchanged, left, conflict
    detail: str
    conflicts: list[Conflict] = field(default_factory=list)
    merged_text: str = ""  # the merge with conflict markers, for showing a conflict

    def line(self) -> str:
        return f"  {self.status:<10} {self.path}: {self.detail}"


@dataclass
class ModifyPlan:
    """New texts of every file to write, plus a report of every file considered; nothing is written."""

    name: str
    changes: ChangeSet
    reports: list[FileReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # said loudly: tests appended that fail for now
    verify: VerifySpec | None = None  # the staged check a hand-written kernel's change must pass

    @property
    def conflicted(self) -> list[FileReport]:
        return [report for report in self.reports if report.status == "conflict"]

    @property
    def conflict_count(self) -> int:
        return sum(max(1, len(report.conflicts)) for report in self.conflicted)

    def report_text(self) -> str:
        lines = [report.line() for report in self.reports] + [f"  note: {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def conflict_text(self) -> str:
        """Each conflicted file's merge around its conflict markers, file by file."""
        chunks = []
        for report in self.conflicted:
            lines = report.merged_text.splitlines()
            for conflict in report.conflicts:
                start = conflict.line - 1
                end = start
                while end < len(lines) and not lines[end].startswith(">>>>>>> "):
                    end += 1
                first, last = max(0, start - CONTEXT_LINES), min(len(lines), end + 1 + CONTEXT_LINES)
                chunks.append(f"--- {report.path}, merged lines {first + 1}-{last} ---")
                chunks.extend(lines[first:last])
            if not report.conflicts:
                chunks.append(f"--- {report.path}: {report.detail} ---")
        return "\n".join(chunks) + "\n"


@dataclass(frozen=True)
class VerifySpec:
    """The appended case test to run in a scratch copy; ``defaults_only``: only its default case must pass
    (``--tests-only``: the others test hyper-parameters the kernel does not have yet)."""

    test_path: str
    test_name: str
    defaults_only: bool = False


# Rendering ---------------------------------------------------------------------------------------------------
def render_formatted(repo: LigerRepo, profile: KernelProfile) -> tuple[dict[str, str], str]:
    """The kernel's files and functional wrapper exactly as ``new`` writes them."""

    try:
        return generate.render_formatted(repo, profile)
    except generate.GenerateError as error:
        raise ModifyError(str(error)) from None


def _compiles(text: str, path: str) -> str | None:
    """None when ``text`` compiles, else why not (one line)."""

    problem = compile_problem(path, text)
    return f"the merge does not compile ({problem})" if problem else None


def _newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _with_newline(text: str, newline: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", newline)


# Three-way merge of one text ---------------------------------------------------------------------------------
def merge_text(
    path: str, base: str, ours: str, theirs: str, what: str = "", prefer: str | None = None
) -> tuple[FileReport, str]:
    """Merge one generated text with its hand-edited copy; returns the report and the text to keep.

    ``prefer`` ("ours"/"theirs"): conflicts are settled with that side (status ``resolved``)."""
    newline = _newline_of(ours)
    base, theirs = _with_newline(base, newline), _with_newline(theirs, newline)
    subject = f"{what} " if what else ""
    if ours == theirs:
        return FileReport(path, "unchanged", f"{subject}already matches the new profile"), ours
    if base == theirs:
        return FileReport(path, "unchanged", f"{subject}renders the same from the new profile; hand edits kept"), ours
    result = merge3(base, ours, theirs, prefer=prefer)
    if not result.clean:
        count = len(result.conflicts)
        detail = f"{subject}{count} conflict{'s' if count > 1 else ''} between hand edits and the new profile"
        return FileReport(path, "conflict", detail, result.conflicts, result.text), ours
    reconciled = f"; {result.reconciled} hand edit(s) already holding the new text kept" if result.reconciled else ""
    if result.resolved:
        count = len(result.resolved)
        side = "the hand edit" if prefer == "ours" else "kernelgen's new text"
        detail = f"{subject}{count} conflict{'s' if count > 1 else ''} settled with {side} (--{prefer}){reconciled}"
        return FileReport(path, "resolved", detail, result.resolved), result.text
    if ours == base:
        return FileReport(path, "updated", f"{subject}no hand edits: now the new profile's render"), result.text
    return FileReport(path, "merged", f"{subject}new profile merged, hand edits kept{reconciled}"), result.text


def function_region(source: str, name: str) -> tuple[int, int] | None:
    """``(first, end)`` line indices of top-level ``def name`` (decorators included), or None."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return first, node.end_lineno
    return None


# Recorded kernels --------------------------------------------------------------------------------------------
def _read_record(repo: LigerRepo, name: str) -> KernelProfile:
    try:
        return read_record(repo.root, name)
    except ProfileError as error:
        raise ModifyError(f"{error.source} is not a usable generation record: {'; '.join(error.problems)}") from None


def _registration_names(profile: KernelProfile) -> set[str]:
    return {
        profile.function_class_name,
        profile.forward_wrapper,
        profile.backward_wrapper,
        profile.module_class_name,
        profile.functional_name,
    }


def _stale_names(old: KernelProfile, new: KernelProfile, texts: dict[str, str]) -> list[str]:
    notes = []
    for name in sorted(_registration_names(old) - _registration_names(new)):
        holders = [path for path, text in texts.items() if re.search(rf"\b{re.escape(name)}\b", text)]
        if holders:
            notes.append(
                f"stale: {name} (from the old profile) is still in {', '.join(holders)}; remove it by hand "
                f"once nothing uses it"
            )
    return notes


def _apply_registrations(
    repo: LigerRepo, plan: ModifyPlan, current: dict[str, str], registration, merged_reports: dict[str, FileReport]
) -> None:
    """Run the inserter over ``current`` (registration files, possibly merged already) and record changes."""

    try:
        registered = register_kernel(current, registration)
    except InsertError as error:
        raise ModifyError(str(error)) from None
    for path, text in current.items():
        final = registered.get(path, text)
        original = repo.read(path)
        report = merged_reports.get(path)
        if final != original:
            problem = _compiles(final, path)
            if problem:
                raise ModifyError(f"internal: {path}: {problem}")
            added = added_lint_findings(original, final, repo.root, path)
            if added:
                raise ModifyError(f"updating {path} would add ruff findings: {added[0]}")
            plan.changes.changes[path] = final
            plan.changes.originals[path] = original
        if report is not None:
            if path in registered and report.status != "conflict":
                report.detail += "; missing registrations added"
                report.status = "registered" if report.status == "unchanged" else report.status
            plan.reports.append(report)
        elif path in registered:
            plan.reports.append(FileReport(path, "registered", "missing registrations added"))
        else:
            plan.reports.append(FileReport(path, "unchanged", "every registration already there"))


def _with_recorded_class_names(old: KernelProfile, new: KernelProfile) -> KernelProfile:
    """``new`` with the kernel's Function and module class names as recorded: a profile analysed again under another
    name (``renamed`` derives names from it) updates the kernel without renaming its classes. A profile that names
    them otherwise on purpose is refused: callers import them, and their registrations would be left behind."""
    derived = copy.deepcopy(new)
    derived.function_class_name = derived.module_class_name = ""
    derived.fill_defaults()
    kept = copy.deepcopy(new)
    for field_name in ("function_class_name", "module_class_name"):
        wanted, recorded = getattr(new, field_name), getattr(old, field_name)
        if wanted != recorded and wanted != getattr(derived, field_name):
            raise ModifyError(
                f"the profile's {field_name} is {wanted}, kernel '{old.operation_name}' has {recorded}: modify "
                f"keeps a kernel's classes (callers import them); set it back, or generate a new kernel under the "
                f"new name"
            )
        setattr(kept, field_name, recorded)
    return kept


def _plan_recorded(repo: LigerRepo, name: str, new: KernelProfile, sides: dict[str, str]) -> ModifyPlan:

    record = record_key(repo.root, name)
    read_from = record_key(repo.root, name, find_record(repo.root, name))  # a legacy in-tree record moves to record
    old = _read_record(repo, name)
    new = _with_recorded_class_names(old, new)
    plan = ModifyPlan(name, ChangeSet())
    recorded = read_record_text(repo.root, name)
    recorded_with = recorded.split("\n", 1)[0]
    if not written_by_this_version(recorded_with):
        plan.notes.append(
            f"{read_from} was written by another kernelgen version ({recorded_with.lstrip('# ')}): differences "
            f"between the two generators' output count as hand edits"
        )
    old_files, old_functional = render_formatted(repo, old)
    new_files, new_functional = render_formatted(repo, new)
    generated_hashes = recorded_hashes(recorded)

    for path in kernel_paths(name).values():
        if not repo.exists(path):
            plan.changes.changes[path] = new_files[path]
            plan.changes.originals[path] = None
            plan.reports.append(FileReport(path, "created", "was missing; rendered from the new profile"))
            continue
        current = repo.read(path)
        # A file nobody edited since kernelgen wrote it (its recorded digest) is its own merge base: what an older
        # kernelgen's templates rendered then is no hand edit, and the new rendering replaces it whole.
        base = current if generated_hashes.get(path) == content_hash(current) else old_files[path]
        report, text = merge_text(path, base, current, new_files[path], prefer=_side(sides, path))
        _keep(plan, repo, path, report, text)

    try:
        utils = generate.ops_utils_with_helpers(repo, new_files)
    except generate.GenerateError as error:
        raise ModifyError(str(error)) from None
    if utils is not None:
        plan.changes.changes[OPS_UTILS] = utils
        plan.changes.originals[OPS_UTILS] = repo.read(OPS_UTILS)
        plan.reports.append(FileReport(OPS_UTILS, "updated", "kernelgen's helpers the new kernel imports added"))
    try:
        shared = shared_module_files(repo, new_files)
    except SharedModuleError as error:
        raise ModifyError(str(error)) from None
    for path, text in shared.items():
        plan.changes.changes[path] = text
        plan.changes.originals[path] = None
        plan.reports.append(FileReport(path, "created", added_file_reason(path)))

    current = {path: repo.read(path) for path in (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL)}
    merged_reports: dict[str, FileReport] = {}
    functional_report = _merge_functional(
        current[FUNCTIONAL], old, new, old_functional, new_functional, _side(sides, FUNCTIONAL)
    )
    if functional_report is not None:
        report, text = functional_report
        current[FUNCTIONAL] = text
        merged_reports[FUNCTIONAL] = report
    _apply_registrations(repo, plan, current, registration_for(new, new_functional), merged_reports)
    plan.notes.extend(
        _stale_names(old, new, {path: plan.changes.changes.get(path, text) for path, text in current.items()})
    )

    text = record_text(new, new_files)
    if recorded != text or read_from != record:
        plan.changes.changes[record] = text
        plan.changes.originals[record] = recorded if read_from == record else None
        plan.reports.append(FileReport(record, "updated", "now records the new profile"))
    return plan


def _side(sides: dict[str, str], path: str) -> str | None:
    """The side (``ours``/``theirs``) conflicts of ``path`` are settled with, if one was asked for."""
    return sides.get(path, sides.get(ALL_FILES))


def _keep(plan: ModifyPlan, repo: LigerRepo, path: str, report: FileReport, text: str) -> None:
    """Record a merged file in the plan; a merge that does not compile is reported as a conflict."""
    if report.status in ("merged", "updated", "resolved"):
        problem = _compiles(text, path)
        if problem:
            report = FileReport(path, "conflict", problem, [], text)
        else:
            plan.changes.changes[path] = text
            plan.changes.originals[path] = repo.read(path)
    plan.reports.append(report)


def _merge_functional(
    source: str, old: KernelProfile, new: KernelProfile, old_snippet: str, new_snippet: str, prefer: str | None = None
) -> tuple[FileReport, str] | None:
    """Merge the functional wrapper's own lines in ``functional.py``; None when the inserter should handle it."""

    if old.functional_name != new.functional_name:
        return None  # a new name: the inserter adds the new wrapper, the old one is reported as stale
    region = function_region(source, new.functional_name)
    if region is None:
        return None  # deleted by hand: the inserter adds it back
    lines = source.splitlines(keepends=True)
    first, end = region
    ours = "".join(lines[first:end])
    what = f"{new.functional_name}():"
    report, merged = merge_text(FUNCTIONAL, old_snippet.lstrip("\n"), ours, new_snippet.lstrip("\n"), what, prefer)
    if report.status == "conflict":
        # Show the conflict at its place in the whole file.
        report.merged_text = "".join(lines[:first]) + report.merged_text + "".join(lines[end:])
        offset = first
        report.conflicts = [Conflict(c.line + offset, c.base, c.ours, c.theirs) for c in report.conflicts]
        return report, source
    merged_source = "".join(lines[:first]) + merged + "".join(lines[end:])
    problem = _compiles(merged_source, FUNCTIONAL)
    if problem:  # a clean text merge can still break the code: the person reconciles it, as a conflict
        return FileReport(FUNCTIONAL, "conflict", problem, [], merged_source), source
    return report, merged_source


# Hand-written kernels ----------------------------------------------------------------------------------------
def _top_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _other_backends(repo: LigerRepo, ops_path: str) -> list[str]:
    """Other implementations of a hand-written kernel's ops file in the checkout (upstream Liger-Kernel's Ascend
    backend, ``ops/backends/_ascend/ops/NAME.py``, and its cuTile kernels, ``ops/cutile/ops/NAME.py``): files of the
    same name under an ``ops`` folder below the ops package, which a change to the kernel's signature leaves behind."""
    package = (repo.root / ops_path).parent
    found = [path for path in package.rglob((repo.root / ops_path).name) if path.parent.name == "ops"]
    return sorted(str(path.relative_to(repo.root)) for path in found if path != repo.root / ops_path)


def _moved_defaults(repo: LigerRepo, api, profile: KernelProfile, mapping) -> list[str]:
    """``eps 1e-06 -> 1e-05`` for each hyper-parameter the kernel takes whose default (its entry's, else a module's
    constructor's) differs from the profile's."""
    from tools.kernelgen.variants.options import default_value
    from tools.kernelgen.variants.options import module_inits

    written: dict[str, object] = {}
    for params in module_inits(repo, api).values():
        written.update({p.name: default_value(p.default) for p in params if p.default is not None})
    written.update({p.name: default_value(p.default) for p in api.entry.params if p.default is not None})
    moved = []
    for hp in profile.hyperparameters:
        old = written.get(mapping.hypers.get(hp.name, ""))
        if old is None or isinstance(old, bool) != isinstance(hp.default, bool):
            continue
        if isinstance(old, (int, float)) and isinstance(hp.default, (int, float)):
            if float(old) != float(hp.default):
                moved.append(f"{hp.name} {old!r} -> {hp.default!r}")
        elif isinstance(old, str) and isinstance(hp.default, str) and old != hp.default:
            moved.append(f"{hp.name} {old!r} -> {hp.default!r}")
    return moved


def _plan_unrecorded(repo: LigerRepo, name: str, new: KernelProfile, tests_only: bool) -> ModifyPlan:

    plan = ModifyPlan(name, ChangeSet())
    paths = kernel_paths(name)
    try:
        api = read_kernel_api(repo, name, new)
        mapping = match_arguments(new, api.entry, allow_new_hypers=True)
    except (ApiError, SignatureMismatch) as error:
        raise ModifyError(str(error)) from None
    added = mapping.new_hypers
    moved = _moved_defaults(repo, api, new, mapping)
    if moved and not tests_only:
        # Appending tests that pass the new value would not change what the kernel's callers get by default.
        raise ModifyError(
            f"cannot move the default{'s' if len(moved) > 1 else ''} of hand-written '{name}' ({', '.join(moved)}): "
            f"its defaults are written in its own files ({paths['ops']}, {paths['module']}); change them there, or "
            f"pass --tests-only to append test cases at the new values alone; nothing written"
        )
    threaded: set[str] = set()
    if added and not tests_only:
        from tools.kernelgen.variants import existing_option

        present = existing_option(repo, name, new)
        if present:
            raise ModifyError(
                f"'{name}' already computes it through options it has: {present}; {', '.join(added)} would "
                f"duplicate them: nothing written"
            )
        try:
            retrofit = plan_retrofit(repo, name, new, api, mapping)
        except RetrofitError as error:
            untestable = unsupported_reason(new)
            advice = (
                f"its cases cannot be appended either: {untestable}"
                if untestable
                else "--tests-only appends the new test cases alone"
            )
            raise ModifyError(
                f"cannot give hand-written '{name}' {', '.join(added)}: {error}; nothing written ({advice})"
            ) from None
        for path, text in retrofit.texts.items():
            plan.changes.changes[path] = text
            plan.changes.originals[path] = repo.read(path)
            plan.reports.append(FileReport(path, "threaded", "; ".join(retrofit.changes.get(path, []))))
            threaded.add(path)
        plan.notes.append(f"math added to the hand-written kernels: {retrofit.delta.describe()}")
        plan.notes.extend(retrofit.notes)
        others = _other_backends(repo, paths["ops"])
        if others:
            plan.warnings.append(
                f"{', '.join(others)} implement{'s' if len(others) == 1 else ''} '{name}' for other hardware "
                f"(selected at run time): only {paths['ops']} takes {', '.join(added)}; the callers now pass "
                f"{'it' if len(added) == 1 else 'them'} to whichever Function the backend selects, so update "
                f"{'that file' if len(others) == 1 else 'those files'} in the same change"
            )
    elif added:
        plan.warnings.append(
            f"--tests-only: the appended cases pass {', '.join(added)} to {api.entry.name}, which does not take "
            f"{'it' if len(added) == 1 else 'them'} yet: those cases FAIL until the kernel implements "
            f"{'it' if len(added) == 1 else 'them'}"
        )
    for role in ("ops", "module"):
        path = paths[role]
        if path in threaded:
            continue
        if repo.exists(path):
            plan.reports.append(FileReport(path, "left", "as is: hand-written (no generation record)"))
        else:
            plan.reports.append(FileReport(path, "left", "missing: a hand-written kernel's file is not generated"))

    test_path = paths["test"]
    call = case_call(new, api, mapping)
    original = repo.read(test_path) if repo.exists(test_path) else None
    try:
        updated = append_cases(original if original is not None else TEST_HEADER, new, repo.root, test_path, call)
    except CasesError as error:
        if added:
            raise ModifyError(
                f"cannot append test cases for {', '.join(added)} to {test_path}: {error}; nothing written"
            ) from None
        plan.reports.append(FileReport(test_path, "left", f"as is: cases not appended ({error})"))
    else:
        if updated is None:
            plan.reports.append(FileReport(test_path, "unchanged", "the profile's cases are already appended"))
        else:
            plan.changes.changes[test_path] = updated
            plan.changes.originals[test_path] = original
            status, detail = (
                ("appended", "a test of the reference's cases; existing tests untouched")
                if original is not None
                else ("created", "a test of the reference's cases (there was no test file)")
            )
            plan.reports.append(FileReport(test_path, status, detail))
            plan.verify = VerifySpec(test_path, case_test_name(new, call), defaults_only=bool(added) and tests_only)
    if not repo.exists(paths["benchmark"]):
        plan.notes.append(f"no {paths['benchmark']}: a hand-written kernel's benchmark is not generated")

    ops_names = _top_level_names(repo.read(paths["ops"]))
    module_names = _top_level_names(repo.read(paths["module"])) if repo.exists(paths["module"]) else set()
    # Only public names the hand-written modules define: registering anything else would break the package's import.
    wanted_ops = tuple(n for n in (api.function_class,) if not n.startswith("_"))
    current = {path: plan.changes.changes.get(path, repo.read(path)) for path in (OPS_INIT, TRANSFORMERS_INIT)}
    registration = Registration(
        kernel=name,
        ops_module=f"liger_kernel.ops.{name}",
        ops_names=tuple(n for n in wanted_ops if n in ops_names),
        transformers_module=f"liger_kernel.transformers.{name}",
        module_names=tuple(n for n in api.module_classes if n in module_names and not n.startswith("_")),
        functional_name=api.functional.name if api.functional else "",
        functional_source="",
        function_class_name=api.function_class,
    )
    if api.functional is None:
        del current[TRANSFORMERS_INIT]
        plan.notes.append(f"{TRANSFORMERS_INIT} left as is: '{name}' has no functional to export")
    if FUNCTIONAL not in threaded:
        reason = f"{api.functional.name} already defined" if api.functional else "no functional (left as is)"
        plan.reports.append(FileReport(FUNCTIONAL, "unchanged", reason))
    _note_unregistered(plan, current, registration)
    return plan


def _note_unregistered(plan: ModifyPlan, current: dict[str, str], registration: Registration) -> None:
    """Names of a hand-written kernel its package does not export are the target's choice (upstream leaves some
    model-specific modules out of ``__init__``): a change that adds an option to the kernel adds nothing else, and
    says what it left."""
    try:
        registered = register_kernel(current, registration)
    except InsertError as error:
        raise ModifyError(str(error)) from None
    wanted = {*registration.ops_names, *registration.module_names, registration.functional_name} - {""}
    for path, text in current.items():
        added = set(registered.get(path, text).splitlines()) - set(text.splitlines())
        names = sorted(name for name in wanted if any(re.search(rf"\b{name}\b", line) for line in added))
        if names:
            plan.notes.append(f"{path} does not export {', '.join(names)}: left as is")
            plan.reports.append(FileReport(path, "left", "as is: the kernel's registrations are not changed"))
        else:
            plan.reports.append(FileReport(path, "unchanged", "every registration already there"))


# Entry points -------------------------------------------------------------------------------------------------
def plan_modify(
    repo: LigerRepo,
    name: str,
    new_profile: KernelProfile,
    *,
    sides: dict[str, str] | None = None,
    tests_only: bool = False,
) -> ModifyPlan:
    """Compute (without writing) the update of kernel ``name`` in ``repo`` to ``new_profile``.

    ``sides``: path (or ``ALL_FILES``) -> "ours"/"theirs", how conflicts of a generated kernel's files are settled.
    ``tests_only``: a hand-written kernel gets the new test cases alone, its code is not changed."""

    check_kernel_name(name)
    if new_profile.operation_name != name:
        new_profile = new_profile.renamed(name)
    # As new records it (no absolute path): generated files and the test cases appended to a hand-written kernel's
    # tests quote it.
    origin = repo.portable_origin(new_profile.reference.origin)
    if origin != new_profile.reference.origin:
        new_profile = copy.deepcopy(new_profile)
        new_profile.reference.origin = origin
    if has_record(repo.root, name):
        if tests_only:
            raise ModifyError(f"--tests-only is for hand-written kernels; '{name}' was generated (it has a record)")
        new_profile.validate(f"profile for {name}")
        plan = _plan_recorded(repo, name, new_profile, sides or {})
        unknown = sorted(set(sides or {}) - {ALL_FILES} - {report.path for report in plan.reports})
        if unknown:
            raise ModifyError(f"--ours/--theirs {unknown[0]}: not a file this --modify merges")
        return plan
    if sides:
        raise ModifyError(f"--ours/--theirs settle merge conflicts; '{name}' is hand-written (nothing is merged)")
    check_modify_target(repo, name)
    return _plan_unrecorded(repo, name, new_profile, tests_only)


def check_modify_target(repo: LigerRepo, name: str) -> None:
    """That kernel ``name`` exists to be modified: checked before a reference is read or run."""
    if has_record(repo.root, name):
        return
    if not existing_kernel_files(repo, name):
        raise ModifyError(f"no kernel '{name}' in {repo.root} to modify; generate it with: new {name}")
    if not repo.exists(kernel_paths(name)["ops"]):
        raise ModifyError(f"'{name}' has no {kernel_paths(name)['ops']} (only registrations): nothing to modify")


def verify_plan(repo: LigerRepo, plan: ModifyPlan) -> None:
    """Try the plan in a scratch copy (see ``verify.verify_changes``); raises ``ModifyError`` when it fails."""
    spec = plan.verify
    if spec is None:
        return
    problem = verify_changes(
        repo, plan.changes.changes, spec.test_path, spec.test_name, defaults_only=spec.defaults_only
    )
    if problem is None:
        return
    if getattr(problem, "crashed", False):
        raise ModifyError(
            f"the appended cases cannot run on this machine ({problem}); the change cannot be checked here: "
            f"nothing written"
        )
    if "-defaults]" in problem:
        raise ModifyError(
            f"the reference at its defaults is not what '{plan.name}' computes now ({problem}); it is not this "
            f"kernel's math: nothing written"
        )
    raise ModifyError(f"the change, tried in a scratch copy, fails: {problem}; nothing written")


def keep_identity(profile: KernelProfile, recorded: KernelProfile) -> None:
    """What callers import stays as recorded when a new reference changes the math: the kernel language, the names
    of the Function, module and functional, and an MLP module (its config-built form) where the new reference is
    the bare activation."""
    profile.backend = recorded.backend
    profile.function_class_name = recorded.function_class_name
    profile.module_class_name = recorded.module_class_name
    profile.functional_name = recorded.functional_name
    same_inputs = len(profile.inputs) == len(recorded.inputs)
    if recorded.module.kind == "mlp" and profile.module.kind == "elementwise" and same_inputs:
        profile.module = copy.deepcopy(recorded.module)


def profile_for_modify(
    repo: LigerRepo, name: str, *, profile_path: str | None = None, reference: str | None = None
) -> KernelProfile:
    """The profile at ``profile_path``, the analysis of ``reference``, else (a kernel generated from it) the built-in
    reference of that name, else the record as it is; a hand-written kernel is changed only by a reference or a
    profile passed. An analysis keeps the recorded kernel language (``backend``): a new reference changes the math,
    not the language the kernel is written in."""
    check_kernel_name(name)
    check_modify_target(repo, name)
    if profile_path:
        return load_profile(profile_path)
    recorded = _read_record(repo, name) if has_record(repo.root, name) else None
    builtin = name in list_builtin_references()
    # A record made from another reference keeps it: the built-in of the same name is a different op.
    if reference or (builtin and recorded is not None and recorded.reference.origin == f"builtin:{name}"):
        profile = analyze_for_checkout(reference or name, name=name, repo_root=repo.root)
        if recorded is not None:
            if profile.tier != recorded.tier:
                raise ModifyError(
                    f"'{name}' is a tier-{recorded.tier} kernel and {reference or name} is tier {profile.tier} "
                    f"({profile.notes.tier_reason.rstrip('.')}): another kind of kernel, which new generates under a "
                    f"name of its own"
                )
            keep_identity(profile, recorded)
        return profile
    if recorded is not None:
        return recorded
    raise ModifyError(f"nothing to modify '{name}' with: pass --profile FILE or --reference REF")
