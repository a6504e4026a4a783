"""Test cases appended to a hand-written kernel's test file by ``--modify`` (kernels without a generation record).

The existing tests are never rewritten: one new, self-contained test function is added at the end of the file.
It checks the profile's shapes, dtypes and hyper-parameter sets against the profile's PyTorch reference, which
is embedded inside a factory function so that its names cannot shadow the module's own helpers. The function
name carries a digest of the cases, so running ``--modify`` again with the same profile adds nothing.
"""

from __future__ import annotations

import ast
import hashlib
import json

from pathlib import Path

import jinja2

from tools.kernelgen.formatting import FormatError
from tools.kernelgen.formatting import format_source
from tools.kernelgen.formatting import lint_findings
from tools.kernelgen.insert import InsertError
from tools.kernelgen.insert import add_import
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.render import common_context

MARKER = "# --- kernelgen --modify"
TEST_UTILS = ("assert_verbose_allclose", "infer_device", "set_seed", "supports_bfloat16")
STRAIGHT_IMPORTS = ("pytest", "torch")

_TEMPLATE = '''\
import pytest
import torch

from liger_kernel.ops.{{ k }} import {{ p.function_class_name }}
from test.utils import assert_verbose_allclose
from test.utils import infer_device
from test.utils import set_seed
from test.utils import supports_bfloat16


{{ marker }}: cases from the profile ({{ origin }}), checked against its PyTorch reference.
# The tests above are hand-written and stay as they are.
def {{ factory }}():
    """The PyTorch reference of those cases, inside a function so that its names stay out of this module."""
{% for line in reference_imports %}
    {{ line }}
{% endfor %}

{{ reference_body | indent(4, first=true) }}

    return {{ p.reference.entry }}


@pytest.mark.parametrize("hyper", {{ hyper_cases }})
@pytest.mark.parametrize("shape", {{ cpu_shapes }} if infer_device() == "cpu" else {{ gpu_shapes }})
@pytest.mark.parametrize(
    "dtype, atol, rtol",
    [
        pytest.param(torch.float32, {{ tol.float32[0] }}, {{ tol.float32[1] }}, id="float32"),
        pytest.param(
            torch.bfloat16,
            {{ tol.bfloat16[0] }},
            {{ tol.bfloat16[1] }},
            id="bfloat16",
            marks=pytest.mark.skipif(not supports_bfloat16(), reason="bfloat16 not supported on this device"),
        ),
    ],
)
def {{ test_name }}(shape, dtype, atol, rtol, hyper):
    device = infer_device()
    set_seed(42)
    entry = {{ factory }}()
    inputs = [
{% for name in inputs %}
{% if positive_domain %}
        (torch.rand(shape, device=device, dtype=torch.float32) * {{ input_scale }} + 0.1).to(dtype),
{% else %}
        (torch.randn(shape, device=device, dtype=torch.float32) * {{ input_scale }}).to(dtype),
{% endif %}
{% endfor %}
    ]
    # float64 reference for fp32 cases, fp32 for bf16 ones: at least as accurate as the kernel's fp32 math.
    ref_dtype = torch.float64 if dtype == torch.float32 else torch.float32
    ref_inputs = [x.detach().to(ref_dtype).requires_grad_(True) for x in inputs]
    liger_inputs = [x.detach().clone().requires_grad_(True) for x in inputs]
{% if params %}
    n_cols = shape[-1]
    reference = entry({{ reference_module_args }}).to(device)
    # Random parameters (not the ones/zeros of a fresh module) so every gradient term is exercised.
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.copy_(torch.rand_like(parameter) + 0.5)
    ref_outputs = reference(*ref_inputs)
    liger_params = [
{% for prm in params %}
        reference.{{ prm.name }}.detach().clone().to(dtype).requires_grad_(True),
{% endfor %}
    ]
    liger_outputs = {{ p.function_class_name }}.apply(*liger_inputs, *liger_params{% for name in hyper_names %}, hyper["{{ name }}"]{% endfor %})
{% elif p.reference.kind == "module" %}
    ref_outputs = entry(**hyper)(*ref_inputs)
    liger_outputs = {{ p.function_class_name }}.apply(*liger_inputs{% for name in hyper_names %}, hyper["{{ name }}"]{% endfor %})
{% else %}
    ref_outputs = entry(*ref_inputs, **hyper)
    liger_outputs = {{ p.function_class_name }}.apply(*liger_inputs{% for name in hyper_names %}, hyper["{{ name }}"]{% endfor %})
{% endif %}
    ref_outputs = ref_outputs if isinstance(ref_outputs, tuple) else (ref_outputs,)
    liger_outputs = liger_outputs if isinstance(liger_outputs, tuple) else (liger_outputs,)
    assert len(liger_outputs) == len(ref_outputs)
    for liger_out, ref_out in zip(liger_outputs, ref_outputs):
        assert liger_out.dtype == dtype
        assert_verbose_allclose(liger_out, ref_out, atol=atol, rtol=rtol, extra_info="[forward]")

    grads = [torch.randn_like(out, dtype=torch.float32) for out in ref_outputs]
    torch.autograd.backward(ref_outputs, [g.to(out.dtype) for g, out in zip(grads, ref_outputs)])
    # Clones: some kernels write the input gradient into the buffer of the output gradient they receive.
    torch.autograd.backward(liger_outputs, [g.to(dtype).clone() for g in grads])
{% for name in inputs %}
{% if name in grad_inputs %}
    assert_verbose_allclose(
        liger_inputs[{{ loop.index0 }}].grad, ref_inputs[{{ loop.index0 }}].grad, atol=atol, rtol=rtol, extra_info="[grad {{ name }}]"
    )
{% endif %}
{% endfor %}
{% for prm in params %}
    # Parameter gradients sum over every row: their tolerance grows with the number of rows summed.
    n_rows = liger_inputs[0].numel() // shape[-1]
    assert_verbose_allclose(
        liger_params[{{ loop.index0 }}].grad,
        reference.{{ prm.name }}.grad,
        atol=atol * n_rows**0.5,
        rtol=rtol * 10,
        extra_info="[grad {{ prm.name }}]",
    )
{% endfor %}
'''


class CasesError(ValueError):
    """The profile's cases cannot be appended to this test file; the message says why, in one line."""


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


def cases_digest(profile: KernelProfile) -> str:
    """Eight hex digits naming the case set: same profile cases, same test function name."""
    context = common_context(profile)
    key = {
        "function": profile.function_class_name,
        "reference": profile.reference.source,
        "entry": profile.reference.entry,
        "hyper_cases": context["hyper_cases"],
        "cpu_shapes": context["cpu_shapes"],
        "gpu_shapes": context["gpu_shapes"],
        "tolerances": context["tol"],
        "domain": [profile.test.input_domain, profile.test.input_scale],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=repr).encode()).hexdigest()[:8]


def case_test_name(profile: KernelProfile) -> str:
    return f"test_{profile.operation_name}_kernelgen_cases_{cases_digest(profile)}"


def _defined_functions(source: str) -> set[str]:
    return {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}


def _module_imports(source: str) -> set[str]:
    """Top-level single-name import lines, normalized (``import torch``, ``from x import y``)."""
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            found.update(f"import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.update(
                f"from {node.module} import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names
            )
    return found


def render_case_block(profile: KernelProfile, host_imports: set[str], repo_root: Path, test_path: str) -> str:
    """The appended block (marker comment, reference factory, test function), ruff-formatted."""
    context = common_context(profile)
    digest = cases_digest(profile)
    # Imports the module already makes would only shadow themselves inside the factory.
    context["reference_imports"] = [line for line in context["reference_imports"] if line not in host_imports]
    context.update(
        marker=MARKER,
        origin=profile.reference.origin or "profile",
        factory=f"_kernelgen_reference_{digest}",
        test_name=case_test_name(profile),
    )
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    standalone = env.from_string(_TEMPLATE).render(context)
    try:
        formatted = format_source(standalone, repo_root, test_path)
    except FormatError as error:
        raise CasesError(f"internal: the appended test for {test_path} is not ruff-clean: {error}") from None
    return formatted[formatted.index(MARKER) :]


def append_cases(source: str, profile: KernelProfile, repo_root: Path, test_path: str) -> str | None:
    """``source`` with the profile's case test appended (and its imports added); None if it is already there."""
    reason = unsupported_reason(profile)
    if reason:
        raise CasesError(reason)
    if case_test_name(profile) in _defined_functions(source):
        return None
    host_imports = _module_imports(source)
    missing = [name for name in STRAIGHT_IMPORTS if f"import {name}" not in host_imports]
    if missing:
        raise CasesError(f"{test_path} has no top-level `import {missing[0]}`; add it by hand and run again")
    updated = source
    try:
        for name in TEST_UTILS:
            updated = add_import(updated, "test.utils", name)
        updated = add_import(updated, f"liger_kernel.ops.{profile.operation_name}", profile.function_class_name)
    except InsertError as error:
        raise CasesError(f"{test_path}: {error.message}") from None
    block = render_case_block(profile, _module_imports(updated), repo_root, test_path)
    newline = "\r\n" if "\r\n" in source else "\n"
    updated = updated.rstrip("\r\n") + "\n\n\n" + block
    updated = updated.replace("\r\n", "\n").replace("\n", newline)
    before = {_without_location(f) for f in lint_findings(source, repo_root, test_path)}
    added = [f for f in lint_findings(updated, repo_root, test_path) if _without_location(f) not in before]
    if added:
        raise CasesError(f"internal: appending cases to {test_path} would add ruff findings: {added[0]}")
    return updated


def _without_location(finding: str) -> str:
    parts = finding.split(": ", 1)
    return parts[1] if len(parts) == 2 else finding
