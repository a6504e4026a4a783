"""The audit's static checks: what a workspace and the checkout must show before the supervisor believes a report.

Each check names the workflow phase that owns it (``-``: the request itself), so a failure tells a fresh
orchestrator where to start again. Checks read files only; ``runtime.py`` re-runs the validators.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass
from dataclasses import field
from functools import cached_property
from pathlib import Path

import yaml

from tools.kernelgen.knowledge import archived_profile_path
from tools.kernelgen.layout import KNOWLEDGE_DIR
from tools.kernelgen.layout import kernel_paths
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import dump_yaml
from tools.kernelgen.profile import load_profile
from tools.kernelgen.record import content_hash
from tools.kernelgen.record import find_record
from tools.kernelgen.record import has_record
from tools.kernelgen.record import read_record
from tools.kernelgen.record import read_record_text
from tools.kernelgen.record import record_key
from tools.kernelgen.record import recorded_hashes
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.workflow import artifacts as files
from tools.kernelgen.workflow.artifacts import ArtifactError
from tools.kernelgen.workflow.artifacts import number
from tools.kernelgen.workflow.artifacts import verdict
from tools.kernelgen.workflow.request import Request
from tools.kernelgen.workflow.request import file_sha256

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
# The decorators that make a function a kernel of each backend (fully qualified through the file's imports).
DSL_DECORATORS = {
    "triton": ("triton.jit", "triton.autotune", "triton.heuristics"),
    "tilelang": ("tilelang.jit", "tilelang.language.prim_func"),
}
# Profile sections that say what the kernel computes (tuning changes ``tiling``; ``notes`` only inform).
UNAPPROVED_SECTIONS = ("tiling", "notes")
FIGURE_TOLERANCE = 0.10  # a claimed figure and its re-measurement agree within 10%


@dataclass
class Check:
    name: str
    phase: str
    verdict: str
    evidence: str
    runtime: bool = False

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL


class Missing(Exception):
    """A file a check needs is not there: the check fails with this text."""


@dataclass
class Workspace:
    """The checkout, the kernel and its workspace as the audit reads them (each file read once, on demand)."""

    repo: LigerRepo
    name: str
    folder: Path
    request: Request
    report: dict[str, str] | None = None  # the ORCHESTRATOR_REPORT's fields, when given
    notes: list[str] = field(default_factory=list)

    def path(self, file: str) -> Path:
        return self.folder / file

    def need(self, file: str) -> Path:
        path = self.path(file)
        if not path.is_file():
            raise Missing(f"{file}: missing")
        return path

    @property
    def paths(self) -> dict[str, str]:
        return kernel_paths(self.name)

    def need_repo(self, relative: str) -> str:
        if not self.repo.exists(relative):
            raise Missing(f"{relative}: missing")
        return self.repo.read(relative)

    @property
    def record_name(self) -> str:
        """The kernel's generation record as messages name it."""
        return record_key(self.repo.root, self.name, find_record(self.repo.root, self.name))

    @cached_property
    def record_text(self) -> str:
        if not has_record(self.repo.root, self.name):
            raise Missing(f"{self.record_name}: missing")
        return read_record_text(self.repo.root, self.name)

    @cached_property
    def record(self):
        self.record_text
        try:
            return read_record(self.repo.root, self.name)
        except ProfileError as error:
            raise Missing(f"{self.record_name}: {error}") from None

    @cached_property
    def ops(self) -> str:
        return self.need_repo(self.paths["ops"])

    @cached_property
    def profile(self):
        path = self.need(files.PROFILE)
        try:
            profile = load_profile(str(path))
        except ProfileError as error:
            raise Missing(f"{files.PROFILE}: {error}") from None
        return profile if profile.operation_name == self.name else profile.renamed(self.name)

    @cached_property
    def validate_report(self) -> dict:
        self.need(files.VALIDATE_REPORT)
        try:
            return files.read_json(self.path(files.VALIDATE_REPORT))
        except ArtifactError as error:
            raise Missing(str(error)) from None

    @cached_property
    def iterations(self):
        try:
            return files.read_iterations(self.path(files.ITERATIONS))
        except ArtifactError as error:
            raise Missing(str(error)) from None

    @cached_property
    def phase_4_summary(self) -> dict[str, str]:
        return files.read_key_values(self.need(files.PHASE_4_SUMMARY))


def _first_difference(a: str, b: str) -> int:
    for index, (left, right) in enumerate(zip(a.splitlines(), b.splitlines()), start=1):
        if left != right:
            return index
    return min(len(a.splitlines()), len(b.splitlines())) + 1


# Checks ---------------------------------------------------------------------------------------------------
def check_reference_untouched(ws: Workspace) -> str:
    path = Path(ws.request.reference_file)
    if not path.is_file():
        raise Missing(f"the reference {path} is gone")
    digest = file_sha256(path)
    if digest != ws.request.reference_sha256:
        raise AssertionError(
            f"{path} changed since the request (sha256 {digest[:12]}, requested {ws.request.reference_sha256[:12]}): "
            f"the reference is the specification; restore it"
        )
    if has_record(ws.repo.root, ws.name):
        embedded = ws.record.reference.source
        if embedded.rstrip() != path.read_text(encoding="utf-8").rstrip():
            line = _first_difference(embedded, path.read_text(encoding="utf-8"))
            raise AssertionError(
                f"{ws.record_name} embeds another reference than {path.name} (first difference at line {line}): "
                f"the kernel was generated and validated against something else"
            )
        return f"{path.name} sha256 {digest[:12]} as requested; the record embeds this very source"
    return f"{path.name} sha256 {digest[:12]} as requested (no kernel yet)"


def check_knowledge(ws: Workspace) -> str:
    text = ws.need(files.KNOWLEDGE).read_text(encoding="utf-8").strip()
    if not text:
        raise AssertionError(f"{files.KNOWLEDGE} is empty")
    return f"{files.KNOWLEDGE}: {text.splitlines()[0][:80]}"


def check_profile_approved(ws: Workspace) -> str:
    path = ws.need(files.PROFILE)
    ws.profile  # it loads
    digest = file_sha256(path)
    approved = files.read_approvals(ws.path(files.APPROVALS)).get(files.PROFILE, set())
    if digest not in approved:
        raise AssertionError(
            f"{files.PROFILE} (sha256 {digest[:12]}) is not in {files.APPROVALS}: a person approves the profile as it "
            f"is (phase 1; phase 3 for hand-written math) before the kernel is generated"
        )
    math = "hand-written math.triton" if ws.profile.math.triton is not None else "derived math"
    return f"{files.PROFILE} sha256 {digest[:12]} approved (tier {ws.profile.tier}, {math})"


def check_sampler(ws: Workspace) -> str:
    from tools.kernelgen.validate.samples import SamplerError
    from tools.kernelgen.validate.samples import default_device
    from tools.kernelgen.validate.samples import draw_samples

    path = ws.need(files.SAMPLER)
    profile = ws.profile if ws.path(files.PROFILE).is_file() else ws.record
    try:
        samples = draw_samples(path, profile, default_device())
    except SamplerError as error:
        raise AssertionError(str(error)) from None
    return f"{files.SAMPLER}: {len(samples)} input set(s) of the right names, device and dtype"


def _semantics(profile) -> dict:
    data = yaml.safe_load(dump_yaml(profile))
    for section in UNAPPROVED_SECTIONS:
        data.pop(section, None)
    # new records where the reference came from as the checkout can quote it (a path relative to it, or a name)
    data.get("reference", {}).pop("origin", None)
    return data


def check_generated_from_profile(ws: Workspace) -> str:
    record = ws.record
    approved, generated = _semantics(ws.profile), _semantics(record)
    if approved != generated:
        differing = sorted(k for k in set(approved) | set(generated) if approved.get(k) != generated.get(k))
        raise AssertionError(
            f"{ws.record_name} differs from the approved {files.PROFILE} in {', '.join(differing)}: the kernel "
            f"was not generated from the approved profile"
        )
    hashes = recorded_hashes(ws.record_text)
    edited = [
        relative
        for role, relative in ws.paths.items()
        if role != "test" and relative in hashes and content_hash(ws.need_repo(relative)) != hashes[relative]
    ]
    if edited:
        raise AssertionError(
            f"{edited[0]} was edited after generation (its sha256 is not the record's): the generation record no "
            f"longer describes the kernel; change the profile and regenerate instead"
        )
    return f"{ws.record_name} = the approved profile (tiling aside); kernel files as generated"


def check_tests_untouched(ws: Workspace) -> str:
    test = ws.paths["test"]
    hashes = recorded_hashes(ws.record_text)
    if test not in hashes:
        raise AssertionError(f"{ws.record_name} records no sha256 for {test}")
    if content_hash(ws.need_repo(test)) != hashes[test]:
        raise AssertionError(
            f"{test} is not the generated test (sha256 differs from the record): tests are never edited to pass"
        )
    return f"{test} as generated"


class _Kernels:
    """Which functions of an ops file are DSL kernels, and which host functions reach a launch of one."""

    def __init__(self, source: str, backend: str):
        self.tree = ast.parse(source)
        self.aliases = self._imports()
        self.defs = list(self._defs(self.tree.body))
        decorators = DSL_DECORATORS.get(backend, ())
        # A kernel is decorated (@triton.jit), or builds one inside (a TileLang program factory: @T.prim_func).
        self.kernels = {
            d.name
            for d in self.defs
            if isinstance(d, ast.FunctionDef)
            and any(
                self._qualified(x) in decorators
                for node in ast.walk(d)
                if isinstance(node, ast.FunctionDef)
                for x in node.decorator_list
            )
        }
        functions = {d.name: d for d in self.defs if isinstance(d, ast.FunctionDef) and d.name not in self.kernels}
        self.launching = set()
        changed = True
        while changed:  # a host function launches when it launches a kernel or calls one that does
            changed = False
            for name, function in functions.items():
                if name not in self.launching and self.reaches(function):
                    self.launching.add(name)
                    changed = True

    def _imports(self) -> dict[str, str]:
        aliases = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        return aliases

    def _qualified(self, node: ast.AST) -> str:
        node = node.func if isinstance(node, ast.Call) else node
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return ""
        return ".".join([self.aliases.get(node.id, node.id), *reversed(parts)])

    def _defs(self, body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                yield node
            elif isinstance(node, ast.If):
                yield from self._defs(node.body)
                yield from self._defs(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    yield from self._defs(block)

    @staticmethod
    def _callee(call: ast.Call) -> str | None:
        """The name a call resolves to through launch syntax: ``k[grid](...)``, ``k(M, N)(...)``, ``k(...)``."""
        func = call.func
        while isinstance(func, (ast.Subscript, ast.Call)):
            func = func.value if isinstance(func, ast.Subscript) else func.func
        return func.id if isinstance(func, ast.Name) else None

    def _compiles(self, call: ast.Call) -> bool:
        """A call that takes a kernel as an argument: TileLang's ``_compiled(program, *settings)``, whose result
        is the launchable kernel."""
        return any(isinstance(argument, ast.Name) and argument.id in self.kernels for argument in call.args)

    def reaches(self, function: ast.FunctionDef) -> bool:
        # names bound to a compiled kernel (kernel = _compiled(program, ...)), launched when called
        compiled = {
            target.id
            for node in ast.walk(function)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and self._compiles(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(function):
            if isinstance(node, ast.Call):
                callee = self._callee(node)
                if callee in self.kernels or callee in self.launching or callee in compiled:
                    return True
                if isinstance(node.func, ast.Call) and self._compiles(node.func):
                    return True
        return False

    def autograd_methods(self) -> dict[str, dict[str, ast.FunctionDef]]:
        classes = {}
        for node in self.defs:
            if isinstance(node, ast.ClassDef) and any(
                self._qualified(b).endswith("autograd.Function") for b in node.bases
            ):
                classes[node.name] = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
        return classes


def _kernels(ws: Workspace) -> _Kernels:
    try:
        return _Kernels(ws.ops, ws.request.backend)
    except SyntaxError as error:
        raise AssertionError(f"{ws.paths['ops']}:{error.lineno}: does not parse") from None


def check_dsl(ws: Workspace) -> str:
    kernels = _kernels(ws)
    backend = ws.request.backend
    if not kernels.kernels:
        decorators = " / ".join(f"@{d}" for d in DSL_DECORATORS.get(backend, ("?",)))
        raise AssertionError(f"{ws.paths['ops']} defines no {backend} kernel ({decorators})")
    classes = kernels.autograd_methods()
    if not classes:
        raise AssertionError(f"{ws.paths['ops']} has no torch.autograd.Function")
    for cls, methods in classes.items():
        forward = methods.get("forward")
        if forward is None or not kernels.reaches(forward):
            raise AssertionError(f"{cls}.forward launches no {backend} kernel: the math does not run in the DSL")
    return f"{len(kernels.kernels)} {backend} kernel(s); {', '.join(classes)}.forward launch them"


def _purity(ws: Workspace):
    from tools.kernelgen.validate.purity import check_source

    profile = ws.record
    grad_names = [t.name for t in profile.inputs if t.requires_grad] + [p.name for p in profile.parameters]
    findings = check_source(ws.ops, ws.paths["ops"], grad_names)
    backward = [f for f in findings if ".backward: " in f.message or f.message.endswith("has no backward")]
    return [f for f in findings if f not in backward], backward


def check_no_framework_math(ws: Workspace) -> str:
    others, _ = _purity(ws)
    if others:
        raise AssertionError(f"{len(others)} finding(s); first: {others[0]}")
    return f"{ws.paths['ops']}: no torch/math in kernels, wrappers only allocate, reshape and launch"


def check_backward_not_stub(ws: Workspace) -> str:
    _, stubs = _purity(ws)
    if stubs:
        raise AssertionError(str(stubs[0]))
    kernels = _kernels(ws)
    for cls, methods in kernels.autograd_methods().items():
        backward = methods.get("backward")
        if backward is None or not kernels.reaches(backward):
            raise AssertionError(
                f"{ws.paths['ops']}:{backward.lineno if backward else 1}: {cls}.backward launches no "
                f"{ws.request.backend} kernel: its gradients are not computed by the kernel"
            )
    wanted = "" if ws.request.backward else " (a backward was not requested; kernelgen generates one anyway)"
    return "every backward computes its gradients through a kernel launch" + wanted


def check_validate_passed(ws: Workspace) -> str:
    report = ws.validate_report
    problems = []
    if report.get("kernel") != ws.name:
        problems.append(f"it is the report of '{report.get('kernel')}'")
    if not report.get("passed"):
        problems.append(f"status {report.get('status')}")
    if (report.get("options") or {}).get("skip_tests"):
        problems.append("the unit tests were skipped (--skip-tests)")
    sampler = ws.path(files.SAMPLER)
    ran = report.get("samples_sha256")
    if not ran or not sampler.is_file() or content_hash(sampler.read_text(encoding="utf-8")) != ran:
        given = (report.get("options") or {}).get("samples")
        problems.append(f"it did not run the workspace's {files.SAMPLER} as it is now (--samples {given})")
    elif not report.get("samples_passed") or report.get("samples_failed"):
        problems.append(f"samples {report.get('samples_passed')} passed, {report.get('samples_failed')} failed")
    stale = [
        relative
        for relative, digest in (report.get("files") or {}).items()
        if not ws.repo.exists(relative) or content_hash(ws.repo.read(relative)) != digest
    ]
    if stale:
        problems.append(f"{stale[0]} changed since that run (the report is stale)")
    if problems:
        raise AssertionError(f"{files.VALIDATE_REPORT}: " + "; ".join(problems))
    return (
        f"{files.VALIDATE_REPORT}: iteration {report.get('iteration')} passed; samples {report['samples_passed']} "
        f"passed, 0 failed; files unchanged since"
    )


def _program(source: str) -> str | None:
    try:
        return ast.dump(ast.parse(source))
    except SyntaxError:
        return None


def check_best_equals_exported(ws: Workspace) -> str:
    best = ws.need(files.BEST).read_text(encoding="utf-8")
    if best == ws.ops:
        return f"{files.BEST} == {ws.paths['ops']}"
    # tune renders candidates without ruff where it is missing (a GPU machine): the same program, formatted apart.
    if _program(best) is not None and _program(best) == _program(ws.ops):
        return f"{files.BEST} is {ws.paths['ops']} as a program (formatting and comments differ)"
    line = _first_difference(best, ws.ops)
    raise AssertionError(
        f"{files.BEST} differs from the exported {ws.paths['ops']} (first at line {line}): the best kernel is "
        f"not the one in the library"
    )


def check_summary_consistent(ws: Workspace) -> str:
    rows = ws.iterations
    if not rows:
        raise AssertionError(f"{files.ITERATIONS} has no rows")
    by_number = {row.number: row for row in rows}
    summary = ws.phase_4_summary
    claimed = summary.get("accepted_iteration")
    row = by_number.get(int(number(claimed))) if number(claimed) is not None else None
    if row is None:
        raise AssertionError(f"{files.PHASE_4_SUMMARY}: accepted_iteration {claimed!r} is no row of {files.ITERATIONS}")
    if not row.accepted:
        raise AssertionError(
            f"{files.PHASE_4_SUMMARY}: accepted_iteration {row.number} has status {row.status} in {files.ITERATIONS}"
        )
    said, measured = number(summary.get("speedup")), row.speedup_value
    # tune's summary gives the accepted row's figures in its own words; an agent-written one has a speedup line.
    if "speedup" in summary and (
        (said is None) != (measured is None) or (said is not None and abs(said - measured) > 1e-3 * max(1, measured))
    ):
        raise AssertionError(
            f"{files.PHASE_4_SUMMARY}: speedup {summary.get('speedup')!r}, but iteration {row.number} of "
            f"{files.ITERATIONS} has {row.speedup}"
        )
    # validate and tune time the same kernel in different processes: only a clearly faster row contradicts.
    better = [
        r
        for r in rows
        if r.accepted and r.speedup_value and measured and r.speedup_value > measured * (1 + FIGURE_TOLERANCE)
    ]
    if better:
        raise AssertionError(
            f"{files.PHASE_4_SUMMARY}: accepted_iteration {row.number} ({row.speedup}x), but iteration "
            f"{better[0].number} was accepted faster ({better[0].speedup}x)"
        )
    if "correctness" in summary and verdict(summary["correctness"]) != verdict(row.correctness):
        raise AssertionError(
            f"{files.PHASE_4_SUMMARY}: correctness {summary.get('correctness')!r}, iteration {row.number} says "
            f"{row.correctness}"
        )
    report = ws.validate_report
    reported = by_number.get(report.get("iteration"))
    if reported is None or (reported.status in files.ACCEPTED) != bool(report.get("passed")):
        raise AssertionError(
            f"{files.VALIDATE_REPORT}: iteration {report.get('iteration')} ({report.get('status')}) does not match "
            f"{files.ITERATIONS} ({reported.status if reported else 'no such row'})"
        )
    for key in ("samples_passed", "samples_failed"):
        if key in summary and number(summary[key]) != number(report.get(key)):
            raise AssertionError(
                f"{files.PHASE_4_SUMMARY}: {key} {summary[key]}, {files.VALIDATE_REPORT}: {report.get(key)}"
            )
    summary_md = ws.path(files.SUMMARY)
    if summary_md.is_file():
        first = summary_md.read_text(encoding="utf-8").splitlines()[:5]
        if first and first[0].startswith("# validate "):
            # summary.md is validate's last run; tune's candidates may follow it in iterations.tsv.
            last = next((r for r in reversed(rows) if not r.by_tune), rows[-1])
            iteration = next((line for line in first if line.startswith("- iteration: ")), "")
            if number(iteration) != last.number or not first[0].endswith(f": {last.status}"):
                raise AssertionError(
                    f"{files.SUMMARY} ({first[0]}, {iteration or 'no iteration'}) is not the last validate row of "
                    f"{files.ITERATIONS} ({last.number}, {last.status})"
                )
    return (
        f"{files.ITERATIONS}: {len(rows)} row(s), schema ok; accepted iteration {row.number} ({row.status}, speedup "
        f"{row.speedup}) as {files.PHASE_4_SUMMARY} says"
    )


def check_archived(ws: Workspace) -> str:
    folder = Path(KNOWLEDGE_DIR) / ws.name
    archived = ws.need_repo(f"{folder.as_posix()}/{ws.name}.py")
    if archived != ws.ops:
        raise AssertionError(f"{folder}/{ws.name}.py is not the current {ws.paths['ops']}: archive the final kernel")
    profile = archived_profile_path(ws.repo.root, ws.name).read_text(encoding="utf-8")
    if profile != ws.record_text:
        raise AssertionError(f"{folder}/profile.yaml is not the current {ws.record_name}")
    return f"{folder}/ holds the final kernel and its record"


def check_results(ws: Workspace) -> str:
    text = ws.need(files.RESULTS).read_text(encoding="utf-8")
    profile = ws.record
    names = [profile.functional_name, profile.module_class_name, profile.function_class_name]
    if not any(name in text for name in names):
        raise AssertionError(f"{files.RESULTS} shows no usage (none of {', '.join(names)} appears)")
    return f"{files.RESULTS}: {len(text.splitlines())} lines, usage shown"


def _close(claimed: float, measured: float) -> bool:
    """Within 10%, or 0.01 for figures near zero (``delta_vs_target`` is a signed fraction)."""
    return abs(claimed - measured) <= max(FIGURE_TOLERANCE * abs(measured), 0.01)


def check_report_consistent(ws: Workspace) -> str:
    fields = ws.report
    missing = [key for key in files.REPORT_FIELDS if key not in fields]
    if missing:
        raise AssertionError(f"ORCHESTRATOR_REPORT lacks {', '.join(missing)}")
    problems = []
    if fields["kernel"] != ws.name:
        problems.append(f"kernel {fields['kernel']!r}")
    status = fields["status"].split(" ")[0]
    if status not in files.REPORT_STATUSES:
        problems.append(f"status {fields['status']!r} is not one of {', '.join(files.REPORT_STATUSES)}")
    if status == "SUCCESS":
        undone = [
            k for k in files.REPORT_FIELDS if k.startswith("phase_") and not fields[k].startswith(("done", "skipped"))
        ]
        if undone:
            problems.append(f"SUCCESS with {undone[0]}: {fields[undone[0]]!r}")
    report = ws.validate_report
    claimed_report = Path(fields["validate_report"])
    if not claimed_report.is_absolute():
        claimed_report = ws.repo.root / claimed_report
    if claimed_report.resolve() != ws.path(files.VALIDATE_REPORT).resolve():
        problems.append(f"validate_report {fields['validate_report']} is not the workspace's {files.VALIDATE_REPORT}")
    correctness = verdict((report.get("correctness") or {}).get("overall"))
    if verdict(fields["correctness"]) != correctness:
        problems.append(f"correctness {fields['correctness']!r}, the validate report says {correctness}")
    for key in ("samples_passed", "samples_failed"):
        if number(fields[key]) != number(report.get(key)):
            problems.append(f"{key} {fields[key]}, the validate report says {report.get(key)}")
    accepted = ws.phase_4_summary.get("accepted_iteration")
    if number(fields["best_iteration"]) != number(accepted):
        problems.append(f"best_iteration {fields['best_iteration']}, {files.PHASE_4_SUMMARY} says {accepted}")
    for key in ("speedup", "speedup_target", "delta_vs_target"):
        said, measured = number(fields[key]), number(report.get(key))
        if (said is None) != (measured is None) or (said is not None and not _close(said, measured)):
            problems.append(f"{key} {fields[key]}, the validate report says {report.get(key)}")
    performance = (report.get("performance") or {}).get("verdict")
    if performance and verdict(fields["performance"]) != verdict(performance):
        problems.append(f"performance {fields['performance']!r}, the validate report says {performance}")
    best = Path(fields["kernel_function_best"])
    best = best if best.is_absolute() else ws.repo.root / best
    if best.resolve() != ws.path(files.BEST).resolve():
        problems.append(f"kernel_function_best {fields['kernel_function_best']} is not the workspace's {files.BEST}")
    if problems:
        raise AssertionError("ORCHESTRATOR_REPORT: " + "; ".join(problems))
    return f"ORCHESTRATOR_REPORT: {len(fields)} fields; its figures are the files' (status {status})"


STATIC_CHECKS = (
    ("reference_untouched", "-", check_reference_untouched),
    ("knowledge", "0", check_knowledge),
    ("profile_approved", "1", check_profile_approved),
    ("sampler_valid", "2", check_sampler),
    ("backward_not_stub", "3|4", check_backward_not_stub),
    ("generated_from_profile", "4", check_generated_from_profile),
    ("tests_untouched", "4", check_tests_untouched),
    ("dsl", "4", check_dsl),
    ("no_framework_math", "4", check_no_framework_math),
    ("validate_passed", "4", check_validate_passed),
    ("best_equals_exported", "4", check_best_equals_exported),
    ("summary_consistent", "4", check_summary_consistent),
    ("archived", "5", check_archived),
    ("results", "6", check_results),
    ("report_consistent", "6", check_report_consistent),
)


def _phase(ws: Workspace, phase: str) -> str:
    """``3|4``: phase 3 owns hand-written math (the backward fragments), phase 4 derived kernels."""
    if phase != "3|4":
        return phase
    try:
        hand_written = (ws.record if has_record(ws.repo.root, ws.name) else ws.profile).math.triton is not None
    except Missing:
        hand_written = False
    return "3" if hand_written else "4"


def run_static(ws: Workspace) -> list[Check]:
    checks = []
    for name, table_phase, check in STATIC_CHECKS:
        phase = _phase(ws, table_phase)
        if name == "report_consistent" and ws.report is None:
            checks.append(Check(name, phase, SKIP, "no --report given"))
            continue
        try:
            checks.append(Check(name, phase, PASS, check(ws)))
        except (AssertionError, Missing) as problem:
            checks.append(Check(name, phase, FAIL, str(problem)))
    return checks
