"""The ``new`` pipeline: profile -> rendered, formatted, registered change set -> one all-or-nothing write.

Everything is computed and checked in memory first (render, ruff, insert, parse, compile); only a change set
with no problem reaches ``writer.write_all``.
"""

from __future__ import annotations

import ast
import copy
import difflib

from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from tools.kernelgen.formatting import FormatError
from tools.kernelgen.formatting import added_lint_findings
from tools.kernelgen.formatting import format_snippet
from tools.kernelgen.formatting import format_source
from tools.kernelgen.formatting import sort_imports
from tools.kernelgen.harness import BENCHMARK_UTILS
from tools.kernelgen.harness import MODEL_CONFIGS
from tools.kernelgen.harness import BenchmarkHarness
from tools.kernelgen.harness import HarnessError
from tools.kernelgen.harness import add_helpers
from tools.kernelgen.harness import read_harness
from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import Registration
from tools.kernelgen.insert import register_kernel
from tools.kernelgen.kernel_helpers import UTILS_MODULE
from tools.kernelgen.kernel_helpers import add_kernel_helpers
from tools.kernelgen.kernel_helpers import missing_helpers
from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import OPS_INIT
from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.layout import check_kernel_name
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.record import content_hash
from tools.kernelgen.record import has_record
from tools.kernelgen.record import read_record
from tools.kernelgen.record import read_record_text
from tools.kernelgen.record import record_key
from tools.kernelgen.record import record_text
from tools.kernelgen.record import recorded_hashes
from tools.kernelgen.render import render_fused_linear
from tools.kernelgen.render import render_kernel
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.shared_module import SharedModuleError
from tools.kernelgen.shared_module import shared_module_files


class GenerateError(ValueError):
    """A kernel that cannot be generated as asked; nothing was written."""


@dataclass
class ChangeSet:
    """Full new texts of every file the command would write, keyed by repository-relative path (the generation
    record by ``record_key``: absolute when the checkout's private state lies outside it)."""

    changes: dict[str, str] = field(default_factory=dict)
    originals: dict[str, str | None] = field(default_factory=dict)

    @property
    def created(self) -> list[str]:
        return sorted(path for path, old in self.originals.items() if old is None)

    @property
    def modified(self) -> list[str]:
        """Existing files whose text changes (``new --force`` over untouched files rewrites them as they are)."""
        return sorted(
            path for path, old in self.originals.items() if old is not None and self.changes.get(path, old) != old
        )

    @property
    def unchanged(self) -> list[str]:
        return sorted(path for path, old in self.originals.items() if old is not None and self.changes.get(path) == old)

    def diff(self) -> str:
        chunks = []
        for path in sorted(self.changes):
            old = self.originals.get(path) or ""
            chunks.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    self.changes[path].splitlines(keepends=True),
                    fromfile=_diff_label("a", path) if self.originals.get(path) is not None else "/dev/null",
                    tofile=_diff_label("b", path),
                )
            )
        return "".join(chunk if chunk.endswith("\n") else chunk + "\n" for chunk in chunks)


def _diff_label(side: str, path: str) -> str:
    return path if Path(path).is_absolute() else f"{side}/{path}"


def existing_kernel_files(repo: LigerRepo, name: str) -> list[str]:
    """Files or registrations that show kernel ``name`` is already in the checkout."""
    found = [path for path in kernel_paths(name).values() if repo.exists(path)]
    ops_module = f"liger_kernel.ops.{name} import"
    if ops_module in repo.read(OPS_INIT):
        found.append(OPS_INIT)
    return found


def check_new_target(repo: LigerRepo, name: str, *, force: bool = False) -> None:
    """Refuse ``new NAME`` before any analysis when the kernel exists (without ``--force``), or when ``--force``
    could only refuse: a hand-written kernel (files, no generation record) is never overwritten."""
    present = existing_kernel_files(repo, name)
    if not present:
        return
    recorded = has_record(repo.root, name)
    paths = kernel_paths(name)
    if not recorded and not repo.exists(paths["ops"]) and OPS_INIT not in present:
        # test/transformers/test_init.py, a module of another role: the name is taken, by no kernel to modify.
        raise GenerateError(
            f"the name '{name}' is taken by {', '.join(present)}, which is no kernel (no {paths['ops']}); choose "
            "another name"
        )
    if not force:
        if recorded:
            advice = (
                f"update it with: modify {name} --reference REF (hand edits are merged), or regenerate the files "
                f"nobody edited with --force"
            )
        else:
            advice = f"it is hand-written (no generation record); change it with: modify {name} --reference REF"
        raise GenerateError(f"kernel '{name}' already exists ({present[0]}); {advice}")
    if not recorded:
        own = [path for path in present if path in kernel_paths(name).values()] or present
        raise GenerateError(
            f"refusing to overwrite {len(own)} file(s) with no generation record ({', '.join(own)}): kernel "
            f"'{name}' is hand-written; nothing written. Change it with: modify {name} --reference REF"
        )


def only_additions(old: str, new: str) -> bool:
    """Whether ``new`` keeps every line of ``old``, in order, and only adds lines (what the inserter does)."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return all(tag in ("equal", "insert") for tag, *_ in matcher.get_opcodes())


def _unchanged_since_generation(repo: LigerRepo, name: str, paths: list[str]) -> dict[str, bool]:
    """For each of the kernel's own ``paths``: does the file still hold what kernelgen last rendered for it?

    The record's sha256 lines answer; a record written before they were kept is rendered again and compared."""
    hashes = recorded_hashes(read_record_text(repo.root, name))
    answers = {path: content_hash(repo.read(path)) == hashes[path] for path in paths if path in hashes}
    rest = [path for path in paths if path not in answers]
    if rest:
        try:
            rendered, _ = render_formatted(repo, read_record(repo.root, name))
        except (ProfileError, GenerateError):
            rendered = {}
        for path in rest:
            answers[path] = path in rendered and rendered[path] == repo.read(path)
    return answers


def overwrite_refusals(
    repo: LigerRepo,
    name: str,
    changes: ChangeSet,
    companions: tuple[str, ...] = (),
    sanctioned: dict[str, str] | None = None,
) -> list[str]:
    """``"PATH (why)"`` for every existing file the change set may not overwrite.

    A kernel's own file is overwritten only when kernelgen generated it (there is a record) and nobody edited it
    since; any other file (registrations, ``ops/utils.py``, other kernels) only ever gets lines added.
    ``companions``: kernels generated with this one under its record (a loss's fused linear form), whose files
    count as its own; ``sanctioned``: shared files' texts after the replacements regeneration may make (the
    kernel's own unedited functional wrapper), to which only lines may be added."""
    sanctioned = sanctioned or {}
    own = {path for kernel in (name, *companions) for path in kernel_paths(kernel).values()}
    record = record_key(repo.root, name)
    recorded = has_record(repo.root, name)
    changed = [
        path
        for path, text in sorted(changes.changes.items())
        if changes.originals.get(path) is not None and changes.originals[path] != text
    ]
    edited = _unchanged_since_generation(repo, name, [p for p in changed if p in own]) if recorded else {}
    refusals = []
    for path in changed:
        if path == record:
            continue  # the record follows the files it describes
        if path in own:
            if not recorded:
                refusals.append(f"{path} (no generation record: hand-written)")
            elif not edited[path]:
                refusals.append(f"{path} (edited since kernelgen generated it)")
        elif not only_additions(sanctioned.get(path, changes.originals[path]), changes.changes[path]):
            refusals.append(f"{path} (not one of the kernel's own files: only additions are allowed)")
    return refusals


def registration_for(profile: KernelProfile, functional_source: str) -> Registration:
    name = profile.operation_name
    return Registration(
        kernel=name,
        ops_module=f"liger_kernel.ops.{name}",
        ops_names=(profile.function_class_name, profile.forward_wrapper, profile.backward_wrapper),
        transformers_module=f"liger_kernel.transformers.{name}",
        module_names=(profile.module_class_name,),
        lazy_names=(),
        functional_name=profile.functional_name,
        functional_source=functional_source,
        function_class_name=profile.function_class_name,
    )


def fused_linear_registration(profile: KernelProfile, functional_source: str) -> Registration:
    """What the fused linear + loss kernel of a loss profile exports."""
    name = profile.fused_linear_name
    function_class, module_class, functional = profile.fused_linear_classes
    return Registration(
        kernel=name,
        ops_module=f"liger_kernel.ops.{name}",
        ops_names=(function_class, f"{name}_forward", f"{name}_backward"),
        transformers_module=f"liger_kernel.transformers.{name}",
        module_names=(module_class,),
        lazy_names=(),
        functional_name=functional,
        functional_source=functional_source,
        function_class_name=function_class,
    )


def plan_new(repo: LigerRepo, profile: KernelProfile, *, force: bool = False) -> ChangeSet:
    """Compute (without writing) every change ``new`` makes for ``profile`` in ``repo``.

    Raises ``GenerateError`` when the kernel exists (without ``force``) or when ``force`` would overwrite a file
    it may not (see ``overwrite_refusals``): then nothing at all is written."""
    name = profile.operation_name
    check_kernel_name(name)
    check_new_target(repo, name, force=force)
    # Analysed from a file: what the profile cannot hold is the reference's (a default of inf), so name the file.
    analysed = profile.reference.origin if ".py" in profile.reference.origin else ""
    profile.validate(analysed or f"profile for {name}")
    origin = repo.portable_origin(profile.reference.origin)
    if origin != profile.reference.origin:
        profile = copy.deepcopy(profile)
        profile.reference.origin = origin
    files, functional_source = render_formatted(repo, profile)
    registrations = [registration_for(profile, functional_source)]
    if profile.fused_linear.enabled:
        fused_present = existing_kernel_files(repo, profile.fused_linear_name)
        if fused_present and not force:
            raise GenerateError(
                f"kernel '{profile.fused_linear_name}' already exists ({fused_present[0]}); "
                f"use --force to overwrite the generated files"
            )
        fused_files, fused_functional = render_formatted(repo, profile, fused_linear=True)
        files.update(fused_files)
        registrations.append(fused_linear_registration(profile, fused_functional))
    changes = ChangeSet()
    for path, text in files.items():
        changes.changes[path] = text
        changes.originals[path] = repo.read(path) if repo.exists(path) else None

    existing = {path: repo.read(path) for path in (OPS_INIT, TRANSFORMERS_INIT, FUNCTIONAL)}
    updated = dict(existing)
    if force and has_record(repo.root, name):
        # Regenerating: the kernel's functional wrapper is its own too, replaced while nobody edited it.
        updated[FUNCTIONAL] = _regenerated_functional(repo, name, registrations[0], existing[FUNCTIONAL])
    sanctioned = dict(updated)  # what shared files may only add lines to
    try:
        for registration in registrations:
            updated.update(register_kernel(updated, registration))
    except InsertError as error:
        raise GenerateError(str(error)) from None
    for path, text in updated.items():
        if text == existing[path]:
            continue
        _check_python(path, text)
        new_findings = added_lint_findings(existing[path], text, repo.root, path)
        if new_findings:
            raise GenerateError(f"registering in {path} would add ruff findings: {new_findings[0]}")
        changes.changes[path] = text
        changes.originals[path] = existing[path]

    utils = ops_utils_with_helpers(repo, files)
    if utils is not None:
        changes.changes[OPS_UTILS] = utils
        changes.originals[OPS_UTILS] = repo.read(OPS_UTILS)
    try:
        shared = shared_module_files(repo, files)
    except SharedModuleError as error:
        raise GenerateError(str(error)) from None
    for path, text in shared.items():
        changes.changes[path] = text
        changes.originals[path] = None

    harness = benchmark_harness(repo)
    if harness.missing:
        # The script calls helpers the target's harness predates: kernelgen's versions join its utils.
        original = repo.read(BENCHMARK_UTILS)
        try:
            updated = add_helpers(original, harness)
        except HarnessError as error:
            raise GenerateError(str(error)) from None
        new_findings = added_lint_findings(original, updated, repo.root, BENCHMARK_UTILS)
        if new_findings:
            raise GenerateError(
                f"adding {', '.join(harness.missing)} to {BENCHMARK_UTILS} would add ruff findings: {new_findings[0]}"
            )
        changes.changes[BENCHMARK_UTILS] = updated
        changes.originals[BENCHMARK_UTILS] = original

    # The record goes to the checkout's private state (``record.py``), written with the files it describes.
    record = record_key(repo.root, name)
    changes.changes[record] = record_text(profile, files)
    changes.originals[record] = read_record_text(repo.root, name) if repo.exists(record) else None
    companions = (profile.fused_linear_name,) if profile.fused_linear.enabled else ()
    refusals = overwrite_refusals(repo, name, changes, companions, sanctioned)
    if refusals:
        raise GenerateError(
            f"refusing to overwrite {len(refusals)} file(s): {'; '.join(refusals)}; nothing written"
            + (f". Hand edits are merged by: modify {name} --profile FILE" if force else "")
        )
    return changes


def ops_utils_with_helpers(repo: LigerRepo, files: dict[str, str]) -> str | None:
    """The target's ``ops/utils.py`` with kernelgen's versions of the helpers the generated ``files`` import from it
    and it lacks (``kernel_helpers.py``); None when it has them all."""
    used = set()
    for path, text in files.items():
        if path.endswith(".py"):
            used |= {
                alias.name
                for node in ast.parse(text).body
                if isinstance(node, ast.ImportFrom) and node.module == UTILS_MODULE
                for alias in node.names
            }
    original = repo.read(OPS_UTILS)
    missing = missing_helpers(original, used)
    if not missing:
        return None
    try:
        updated = add_kernel_helpers(original, missing, lambda text: sort_imports(text, repo.root, OPS_UTILS))
    except (InsertError, FormatError) as error:
        raise GenerateError(str(error)) from None
    new_findings = added_lint_findings(original, updated, repo.root, OPS_UTILS)
    if new_findings:
        raise GenerateError(f"adding {', '.join(missing)} to {OPS_UTILS} would add ruff findings: {new_findings[0]}")
    return updated


def benchmark_harness(repo: LigerRepo) -> BenchmarkHarness:
    """The benchmark harness ``repo`` implements (the style of script to render for it)."""
    try:
        return read_harness(
            repo.read(BENCHMARK_UTILS) if repo.exists(BENCHMARK_UTILS) else None,
            repo.read(MODEL_CONFIGS) if repo.exists(MODEL_CONFIGS) else None,
        )
    except HarnessError as error:
        raise GenerateError(str(error)) from None


def _regenerated_functional(repo: LigerRepo, name: str, registration: Registration, functional: str) -> str:
    """``functional.py`` with kernel ``name``'s wrapper replaced by the new one, when the wrapper there is still
    exactly what kernelgen rendered from the kernel's record; an edited wrapper that would change is refused."""
    tree = ast.parse(functional)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == registration.functional_name]
    if len(found) != 1:
        return functional
    try:
        _, previous = render_formatted(repo, read_record(repo.root, name))
    except (ProfileError, GenerateError):
        return functional
    node = found[0]
    lines = functional.splitlines(keepends=True)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    current = "".join(lines[start : node.end_lineno]).strip()
    if current == registration.functional_source.strip():
        return functional
    if current != previous.strip():  # edited since (a comment counts): --modify merges, --force may not
        raise GenerateError(
            f"refusing to overwrite {FUNCTIONAL}: {registration.functional_name} was edited since kernelgen generated "
            f"it; nothing written. Hand edits are merged by: modify {name} --reference REF"
        )
    return "".join(lines[:start]) + registration.functional_source.strip() + "\n" + "".join(lines[node.end_lineno :])


def render_formatted(repo: LigerRepo, profile: KernelProfile, fused_linear: bool = False) -> tuple[dict[str, str], str]:
    """The kernel's own files and its functional wrapper (``fused_linear``: those of the loss's fused linear
    kernel), rendered for ``repo`` and formatted with its ruff."""
    style = benchmark_harness(repo).style
    render = render_fused_linear if fused_linear else render_kernel
    rendered = render(profile, benchmark_style=style)
    files = {}
    try:
        for path, text in rendered.files.items():
            files[path] = format_source(text, repo.root, path)
            _check_python(path, files[path])
        functional_source = format_snippet(rendered.functional_source, repo.root, FUNCTIONAL)
    except FormatError as error:
        raise GenerateError(f"internal: template output is not ruff-clean: {error}") from None
    return files, functional_source


def compile_problem(path: str, text: str) -> str | None:
    """None when ``text`` compiles, else why not (one line)."""
    try:
        compile(ast.parse(text, filename=path), path, "exec")
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}"
    return None


def _check_python(path: str, text: str) -> None:
    problem = compile_problem(path, text)
    if problem:
        raise GenerateError(f"internal: generated {path} does not compile ({problem})")
