"""``new NAME --modify`` (alias ``modify NAME``): update an existing kernel in place, keeping hand edits.

Kernels kernelgen generated have a record (``.kernelgen/NAME.yaml``: the profile they were made from). Their
files are three-way merged, line by line: base = the recorded profile rendered again, ours = the file on
disk (with hand edits), theirs = the new profile rendered. The functional wrapper is merged the same way,
on its own text region in ``functional.py``. Registrations are re-run with the inserter (idempotent adds);
names the old profile registered and the new one does not are reported, not deleted.

Hand-written kernels (no record) are never rewritten: missing registrations are added, the profile's cases
are appended to the test file as one new test function, a missing test or benchmark is created from the
template, and everything else is reported as left as is.

Everything is computed in memory; one conflict anywhere means nothing is written (the conflicts are shown),
otherwise one all-or-nothing ``writer.write_all``.
"""

from __future__ import annotations

import ast
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
from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import Registration
from tools.kernelgen.insert import register_kernel
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.layout import check_kernel_name
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.layout import record_path
from tools.kernelgen.merge import Conflict
from tools.kernelgen.merge import merge3
from tools.kernelgen.modify_tests import CasesError
from tools.kernelgen.modify_tests import append_cases
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import load_profile
from tools.kernelgen.record import read_record
from tools.kernelgen.record import record_text
from tools.kernelgen.record import written_by_this_version
from tools.kernelgen.repo import LigerRepo

EXIT_CONFLICT = 1
CONTEXT_LINES = 2


class ModifyError(ValueError):
    """A kernel that cannot be modified as asked; nothing was written."""


@dataclass
class FileReport:
    """What ``--modify`` does to one file, and why."""

    path: str
    status: str  # merged, updated, created, registered, appended, unchanged, left, conflict
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
def merge_text(path: str, base: str, ours: str, theirs: str, what: str = "") -> tuple[FileReport, str]:
    """Merge one generated text with its hand-edited copy; returns the report and the text to keep."""
    newline = _newline_of(ours)
    base, theirs = _with_newline(base, newline), _with_newline(theirs, newline)
    subject = f"{what} " if what else ""
    if ours == theirs:
        return FileReport(path, "unchanged", f"{subject}already matches the new profile"), ours
    if base == theirs:
        return FileReport(path, "unchanged", f"{subject}renders the same from the new profile; hand edits kept"), ours
    result = merge3(base, ours, theirs)
    if not result.clean:
        count = len(result.conflicts)
        detail = f"{subject}{count} conflict{'s' if count > 1 else ''} between hand edits and the new profile"
        return FileReport(path, "conflict", detail, result.conflicts, result.text), ours
    if ours == base:
        return FileReport(path, "updated", f"{subject}no hand edits: now the new profile's render"), result.text
    return FileReport(path, "merged", f"{subject}new profile merged, hand edits kept"), result.text


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


def _plan_recorded(repo: LigerRepo, name: str, new: KernelProfile) -> ModifyPlan:

    record = record_path(name)
    old = _read_record(repo, name)
    plan = ModifyPlan(name, ChangeSet())
    recorded_with = repo.read(record).split("\n", 1)[0]
    if not written_by_this_version(recorded_with):
        plan.notes.append(
            f"{record} was written by another kernelgen version ({recorded_with.lstrip('# ')}): differences "
            f"between the two generators' output count as hand edits"
        )
    old_files, old_functional = render_formatted(repo, old)
    new_files, new_functional = render_formatted(repo, new)

    for path in kernel_paths(name).values():
        if not repo.exists(path):
            plan.changes.changes[path] = new_files[path]
            plan.changes.originals[path] = None
            plan.reports.append(FileReport(path, "created", "was missing; rendered from the new profile"))
            continue
        report, text = merge_text(path, old_files[path], repo.read(path), new_files[path])
        _keep(plan, repo, path, report, text)

    current = {path: repo.read(path) for path in (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL)}
    merged_reports: dict[str, FileReport] = {}
    functional_report = _merge_functional(current[FUNCTIONAL], old, new, old_functional, new_functional)
    if functional_report is not None:
        report, text = functional_report
        current[FUNCTIONAL] = text
        merged_reports[FUNCTIONAL] = report
    _apply_registrations(repo, plan, current, registration_for(new, new_functional), merged_reports)
    plan.notes.extend(
        _stale_names(old, new, {path: plan.changes.changes.get(path, text) for path, text in current.items()})
    )

    text = record_text(new, new_files)
    if repo.read(record) != text:
        plan.changes.changes[record] = text
        plan.changes.originals[record] = repo.read(record)
        plan.reports.append(FileReport(record, "updated", "now records the new profile"))
    return plan


def _keep(plan: ModifyPlan, repo: LigerRepo, path: str, report: FileReport, text: str) -> None:
    """Record a merged file in the plan; a merge that does not compile is reported as a conflict."""
    if report.status in ("merged", "updated"):
        problem = _compiles(text, path)
        if problem:
            report = FileReport(path, "conflict", problem, [], text)
        else:
            plan.changes.changes[path] = text
            plan.changes.originals[path] = repo.read(path)
    plan.reports.append(report)


def _merge_functional(
    source: str, old: KernelProfile, new: KernelProfile, old_snippet: str, new_snippet: str
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
    report, merged = merge_text(FUNCTIONAL, old_snippet.lstrip("\n"), ours, new_snippet.lstrip("\n"), what)
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


def _plan_unrecorded(repo: LigerRepo, name: str, new: KernelProfile) -> ModifyPlan:

    plan = ModifyPlan(name, ChangeSet())
    paths = kernel_paths(name)
    rendered: list[tuple[dict[str, str], str]] = []

    def render_once() -> tuple[dict[str, str], str]:
        if not rendered:
            rendered.append(render_formatted(repo, new))
        return rendered[0]

    for role in ("ops", "module"):
        path = paths[role]
        if repo.exists(path):
            plan.reports.append(FileReport(path, "left", "as is: no generation record; edit it by hand"))
        else:
            plan.reports.append(
                FileReport(path, "left", "missing, not created: no generation record (new NAME --force generates all)")
            )

    test_path = paths["test"]
    if repo.exists(test_path):
        original = repo.read(test_path)
        try:
            updated = append_cases(original, new, repo.root, test_path)
        except CasesError as error:
            plan.reports.append(FileReport(test_path, "left", f"as is: cases not appended ({error})"))
        else:
            if updated is None:
                plan.reports.append(FileReport(test_path, "unchanged", "the profile's cases are already appended"))
            else:
                plan.changes.changes[test_path] = updated
                plan.changes.originals[test_path] = original
                plan.reports.append(
                    FileReport(test_path, "appended", "a test of the profile's cases; existing tests untouched")
                )
    for role, path in (("test", test_path), ("benchmark", paths["benchmark"])):
        if not repo.exists(path):
            plan.changes.changes[path] = render_once()[0][path]
            plan.changes.originals[path] = None
            plan.reports.append(FileReport(path, "created", f"missing {role}, rendered from the template"))
        elif role == "benchmark":
            plan.reports.append(FileReport(path, "left", "as is: no generation record; edit it by hand"))

    ops_names = _top_level_names(repo.read(paths["ops"])) if repo.exists(paths["ops"]) else set()
    module_names = _top_level_names(repo.read(paths["module"])) if repo.exists(paths["module"]) else set()
    # Only names the hand-written modules define: registering anything else would break the package's import.
    wanted_ops = (new.function_class_name, new.forward_wrapper, new.backward_wrapper)
    current = {path: repo.read(path) for path in (OPS_INIT, TRANSFORMERS_INIT)}
    has_functional = new.functional_name in _top_level_names(repo.read(FUNCTIONAL))
    can_add_functional = new.function_class_name in ops_names and not has_functional
    if can_add_functional:
        current[FUNCTIONAL] = repo.read(FUNCTIONAL)
    else:
        reason = f"{new.functional_name} already defined" if has_functional else "no autograd Function to wrap"
        plan.reports.append(FileReport(FUNCTIONAL, "unchanged", reason))
    if not (has_functional or can_add_functional):
        # transformers/__init__.py re-exports the functional wrapper, which this kernel does not have.
        del current[TRANSFORMERS_INIT]
        plan.notes.append(f"{TRANSFORMERS_INIT} left as is: no {new.functional_name} to export")
    registration = Registration(
        kernel=name,
        ops_module=f"liger_kernel.ops.{name}",
        ops_names=tuple(n for n in wanted_ops if n in ops_names),
        transformers_module=f"liger_kernel.transformers.{name}",
        module_names=tuple(n for n in (new.module_class_name,) if n in module_names),
        functional_name=new.functional_name,
        functional_source=render_once()[1] if can_add_functional else "",
        function_class_name=new.function_class_name,
    )
    _apply_registrations(repo, plan, current, registration, {})
    skipped = [n for n in wanted_ops if n not in ops_names] + [
        n for n in (new.module_class_name,) if n not in module_names
    ]
    if skipped:
        plan.notes.append(f"not registered (not defined by the hand-written modules): {', '.join(skipped)}")
    plan.notes.append(f"no {record_path(name)} written: the kernel is hand-written, so there is nothing to merge with")
    return plan


# Entry points -------------------------------------------------------------------------------------------------
def plan_modify(repo: LigerRepo, name: str, new_profile: KernelProfile) -> ModifyPlan:
    """Compute (without writing) the update of kernel ``name`` in ``repo`` to ``new_profile``."""

    check_kernel_name(name)
    if new_profile.operation_name != name:
        new_profile = new_profile.renamed(name)
    new_profile.validate(f"profile for {name}")
    if repo.exists(record_path(name)):
        return _plan_recorded(repo, name, new_profile)
    if not existing_kernel_files(repo, name):
        raise ModifyError(f"no kernel '{name}' in {repo.root} to modify; generate it with: new {name}")
    return _plan_unrecorded(repo, name, new_profile)


def profile_for_modify(
    repo: LigerRepo, name: str, *, profile_path: str | None = None, reference: str | None = None
) -> KernelProfile:
    """The profile at ``profile_path``, the analysis of ``reference``, else the built-in reference of that name,
    else the record as it is."""
    if profile_path:
        return load_profile(profile_path)
    if reference:
        return analyze_for_checkout(reference, name=name, repo_root=repo.root)
    recorded = _read_record(repo, name) if repo.exists(record_path(name)) else None
    builtin = name in list_builtin_references()
    # A record made from another reference keeps it: the built-in of the same name is a different op.
    if builtin and (recorded is None or recorded.reference.origin == f"builtin:{name}"):
        return analyze_for_checkout(name, name=name, repo_root=repo.root)
    if recorded is not None:
        return recorded
    raise ModifyError(f"nothing to modify '{name}' with: pass --profile FILE or --reference REF")
