"""Test cases appended to a hand-written kernel's test file by ``--modify`` (kernels without a generation record).

The existing tests are never rewritten: one new, self-contained test function is added at the end of the file.
It checks the profile's shapes, dtypes and hyper-parameter sets against the profile's PyTorch reference, which
is embedded inside a factory function so that its names cannot shadow the module's own helpers. The kernel is
called through what the checkout really has (``CaseCall``: its functional with every argument by name, else
``Function.apply``), so the test imports only names that exist. A hyper-parameter the kernel is being given (new
in the reference) is passed only when a case moves it off its default: the default case checks that the kernel
as it was computes the new reference there. The function name carries a digest of the cases, so running
``--modify`` again with the same profile adds nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.formatting import FormatError
from tools.kernelgen.formatting import added_lint_findings
from tools.kernelgen.formatting import format_source
from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import add_import
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.render import kernel_view
from tools.kernelgen.render import single_line_imports
from tools.kernelgen.render import template_environment
from tools.kernelgen.render import test_view

MARKER = "# --- kernelgen --modify"
TEST_UTILS = ("assert_verbose_allclose", "infer_device", "set_seed", "supports_bfloat16")
STRAIGHT_IMPORTS = ("pytest", "torch")
TEMPLATE = "test_cases_appended.py.j2"


class CasesError(ValueError):
    """The profile's cases cannot be appended to this test file; the message says why, in one line."""


@dataclass(frozen=True)
class CaseCall:
    """How the appended test calls the kernel: ``from module import name``, then ``expression`` (which reads
    ``liger_inputs``, ``liger_params`` and ``kwargs``, the case's hyper-parameters by name)."""

    module: str
    name: str
    expression: str
    new_defaults: tuple[tuple[str, object], ...] = ()  # (name, default) of hyper-parameters new to the kernel


def case_call(profile: KernelProfile, api, mapping) -> CaseCall:
    """The call of ``api.entry`` with the reference's arguments as ``mapping`` (``hostapi.match_arguments``) maps
    them."""
    inputs = [t.name for t in profile.inputs]
    params = [p.name for p in profile.parameters]
    new = tuple((hp.name, hp.default) for hp in profile.hyperparameters if hp.name in mapping.new_hypers)
    entry = api.entry
    if api.entry_is_functional:
        args = [f"{mapping.tensors[name]}=liger_inputs[{i}]" for i, name in enumerate(inputs)]
        args += [f"{mapping.tensors[name]}=liger_params[{i}]" for i, name in enumerate(params)]
        return CaseCall(entry.module, entry.name, f"{entry.name}({', '.join(args + ['**kwargs'])})", new)
    values = {mapping.tensors[name]: f"liger_inputs[{i}]" for i, name in enumerate(inputs)}
    values.update({mapping.tensors[name]: f"liger_params[{i}]" for i, name in enumerate(params)})
    values.update({entry_name: f"kwargs[{ref!r}]" for ref, entry_name in mapping.hypers.items()})
    order = [p.name for p in entry.params]
    last = max((order.index(name) for name in values), default=-1)
    args = [values.get(p.name, p.default or "None") for p in entry.params[: last + 1]]
    args += [f"kwargs[{name!r}]" for name, _ in new]
    return CaseCall(entry.module, api.function_class, f"{entry.name}({', '.join(args)})", new)


def unsupported_reason(profile: KernelProfile) -> str | None:
    """Why the generic case test cannot exercise this kernel (None when it can)."""
    if profile.tier == 3:
        return "tier 3 kernels (losses over a class dimension) need their hand-written test harness"
    odd = [t.name for t in profile.inputs if t.dtype != "same"]
    if odd:
        return f"inputs {', '.join(odd)} are not floating-point tensors shaped like the others"
    if not profile.reference.source.strip() or not profile.reference.entry:
        return "the profile has no PyTorch reference to compare against"
    return None


def cases_digest(profile: KernelProfile, call: CaseCall) -> str:
    """Eight hex digits naming the case set: same profile cases, same test function name."""
    test = test_view(profile)
    key = {
        # Not ``new_defaults``: once the kernel has a hyper-parameter it is no longer new, and the cases are the same.
        "call": [call.module, call.expression],
        "reference": profile.reference.source,
        "entry": profile.reference.entry,
        "hyper_cases": test.hyper_cases,
        "cpu_shapes": test.cpu_shapes,
        "gpu_shapes": test.gpu_shapes,
        "tolerances": test.tol,
        "domain": [profile.test.input_domain, profile.test.input_scale],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=repr).encode()).hexdigest()[:8]


def case_test_name(profile: KernelProfile, call: CaseCall) -> str:
    return f"test_{profile.operation_name}_kernelgen_cases_{cases_digest(profile, call)}"


def hyper_ids(cases: list[dict], defaults: dict) -> list[str]:
    """pytest ids of the hyper-parameter cases: ``defaults``, then what each case moves (``scale=2.0``)."""
    ids = []
    for case in cases:
        moved = [f"{name}={value!r}" for name, value in case.items() if value != defaults.get(name)]
        ids.append(",".join(moved) or "defaults")
    return ids


def _defined_functions(source: str) -> set[str]:
    return {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}


def _bound_names(source: str) -> set[str]:
    """Names the module binds at its top level by an import or a definition."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _module_imports(source: str) -> set[str]:
    """Top-level single-name import lines, normalized (``import torch``, ``from x import y``)."""
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0):
            found.update(single_line_imports(node))
    return found


def render_case_block(
    profile: KernelProfile, call: CaseCall, host_imports: set[str], repo_root: Path, test_path: str
) -> str:
    """The appended block (marker comment, reference factory, test function), ruff-formatted."""
    kernel = kernel_view(profile)
    digest = cases_digest(profile, call)
    test = test_view(profile)
    # Imports the module already makes would only shadow themselves inside the factory; the standalone text that
    # ruff formats gets them at its top instead (so their names resolve there), and only the block is kept.
    imports = [line for line in kernel.reference_imports if line not in host_imports]
    borrowed = [line for line in kernel.reference_imports if line in host_imports]
    context = dict(
        kernel=dataclasses.replace(kernel, reference_imports=imports),
        test=test,
        marker=MARKER,
        origin=profile.reference.origin or "profile",
        factory=f"_kernelgen_reference_{digest}",
        test_name=case_test_name(profile, call),
        call=call,
        hyper_ids=hyper_ids(test.hyper_cases, {hp.name: hp.default for hp in profile.hyperparameters}),
        new_defaults=sorted(call.new_defaults),
        borrowed_imports=borrowed,
    )
    standalone = template_environment().get_template(TEMPLATE).render(context)
    try:
        formatted = format_source(standalone, repo_root, test_path)
    except FormatError as error:
        raise CasesError(f"internal: the appended test for {test_path} is not ruff-clean: {error}") from None
    return formatted[formatted.index(MARKER) :]


def _import(source: str, module: str, name: str) -> str:
    """``add_import``; a file without imports of that package gets the line after its first-party (liger_kernel)
    imports, which sort before ``test``, else after its last top-level import."""
    try:
        return add_import(source, module, name)
    except InsertError:
        pass
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    first_party = [
        node for node in imports if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("liger_kernel")
    ]
    anchor = (first_party or imports or [None])[-1]
    line = f"from {module} import {name}\n"
    if anchor is None:
        return line + source
    return "".join(lines[: anchor.end_lineno] + [line] + lines[anchor.end_lineno :])


def append_cases(source: str, profile: KernelProfile, repo_root: Path, test_path: str, call: CaseCall) -> str | None:
    """``source`` with the profile's case test appended (and its imports added); None if it is already there."""
    reason = unsupported_reason(profile)
    if reason:
        raise CasesError(reason)
    if case_test_name(profile, call) in _defined_functions(source):
        return None
    host_imports = _module_imports(source)
    missing = [name for name in STRAIGHT_IMPORTS if f"import {name}" not in host_imports]
    if missing:
        raise CasesError(f"{test_path} has no top-level `import {missing[0]}`; add it by hand and run again")
    updated = source
    # A name the file already has from elsewhere (upstream's tests take ``infer_device`` from ``liger_kernel.utils``)
    # is the same helper: importing it again would redefine it.
    bound = _bound_names(source)
    try:
        for module, name in [("test.utils", name) for name in TEST_UTILS] + [(call.module, call.name)]:
            if name in bound:
                continue
            updated = _import(updated, module, name)
    except InsertError as error:
        raise CasesError(f"{test_path}: {error.message}") from None
    block = render_case_block(profile, call, _module_imports(updated), repo_root, test_path)
    newline = "\r\n" if "\r\n" in source else "\n"
    updated = updated.rstrip("\r\n") + "\n\n\n" + block
    updated = updated.replace("\r\n", "\n").replace("\n", newline)
    added = added_lint_findings(source, updated, repo_root, test_path)
    if added:
        raise CasesError(f"internal: appending cases to {test_path} would add ruff findings: {added[0]}")
    return updated
