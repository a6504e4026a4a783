"""Fill a ``KernelProfile`` from a traced and classified reference: tensors, parameters, the math as formulas."""

from __future__ import annotations

import copy
import dataclasses
import re

from typing import Any

import torch.fx as fx

from tools.kernelgen.analyze.classify import CLASS_LOSSES
from tools.kernelgen.analyze.classify import Classification
from tools.kernelgen.analyze.describe import forward_computation
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.formulas import profile_math
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import is_fractional_exponent
from tools.kernelgen.analyze.ops import is_integer_exponent
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.derivation import elementwise_math
from tools.kernelgen.derivation import row_math
from tools.kernelgen.profile import CLOSEST_KERNEL_BY_TIER
from tools.kernelgen.profile import SNAKE_CASE
from tools.kernelgen.profile import Backward
from tools.kernelgen.profile import BenchmarkSpec
from tools.kernelgen.profile import InitParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import ModuleSpec
from tools.kernelgen.profile import Notes
from tools.kernelgen.profile import OutputSpec
from tools.kernelgen.profile import Reference
from tools.kernelgen.profile import TensorSpec
from tools.kernelgen.profile import TestSpec

DEFAULT_BENCHMARK_CONFIG = {"hidden_size": 4096}
MLP_CONFIG = InitParameter(
    name="config",
    default=None,
    description="HF-style model config object: hidden_size, intermediate_size and the hyper-parameters by name",
)
TODO_TIER3 = (
    "tier 3 is the softmax-loss template (ops_tier3.py.j2): a reference of another loss cannot be generated yet"
)
_DOMAIN_OPS = ("log", "log1p", "sqrt", "rsqrt")
_NONNEGATIVE_OPS = {"exp", "sigmoid", "softplus", "relu", "abs", "square", "sqrt", "rsqrt", "softmax", "var", "std"}
_NONNEGATIVE_OPS |= {"norm"}
# Hinted names of the reference's own classes: they only apply under its natural name (closest_existing_kernel,
# hinted, applies under any name).
_HINTED_IDENTITY = ("function_class_name", "module_class_name", "functional_name")


def snake_case(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_") or "kernel"


def build_profile(traced: TracedReference, classification: Classification, name: str | None) -> KernelProfile:
    loaded = traced.loaded
    natural = loaded.builtin_name or snake_case(loaded.entry)
    operation_name = name or natural
    if not SNAKE_CASE.match(operation_name):
        raise AnalyzeError(f"kernel name {operation_name!r} is not snake_case (e.g. my_activation)")
    hints = loaded.hints
    kind = hints.get("module_kind") or _default_module_kind(traced, classification)
    identity = {key: hints[key] for key in _HINTED_IDENTITY if key in hints and operation_name == natural}
    notes = _notes(traced, hints, classification)

    profile = KernelProfile(
        operation_name=operation_name,
        tier=classification.tier,
        inputs=_inputs(traced),
        outputs=_outputs(traced),
        hyperparameters=[copy.deepcopy(h) for h in traced.hyperparameters],
        parameters=[copy.deepcopy(p) for p in traced.parameters],
        forward_computation=forward_computation(traced),
        module=ModuleSpec(
            kind=kind,
            init_params=_init_params(traced, kind),
            size_param=traced.size_param,
            hidden_act=str(hints.get("hidden_act", operation_name)) if kind == "mlp" else "",
            variants=[str(variant) for variant in hints.get("module_variants", [])] if kind == "mlp" else [],
        ),
        benchmark=_benchmark(hints, loaded.origin),
        backward=_apply_hints(Backward(), hints.get("backward", {}), "backward", loaded.origin),
        reference=Reference(
            source=loaded.source,
            entry=loaded.entry,
            kind=loaded.kind,
            origin=loaded.origin if not loaded.builtin_name else f"builtin:{loaded.builtin_name}",
        ),
        test=_test_spec(traced, hints, classification.tier),
        notes=notes,
        **identity,
    )
    if classification.tier != 1:
        for param in profile.parameters:
            if param.enabled_by:
                notes.remarks.append(
                    f"{param.name} is optional in the reference ({param.enabled_by}=False drops it); the tier-"
                    f"{classification.tier} templates take every parameter, so the generated module always has it"
                )
                param.enabled_by = ""
    if classification.tier in (1, 2):
        profile.math, program = profile_math(traced)
        for output in profile.outputs:
            output.keepdim = program.keepdim[output.name]
        derive = elementwise_math if classification.tier == 1 else row_math
        notes.gradient_formulas = dict(derive(profile, profile.reference.origin).gradient_formulas)
    else:
        notes.remarks.append(TODO_TIER3)
    return profile


def _notes(traced: TracedReference, hints: dict[str, Any], classification: Classification) -> Notes:
    closest = hints.get("closest_existing_kernel") or CLOSEST_KERNEL_BY_TIER.get(classification.tier, "")
    notes = Notes(tier_reason=classification.reason, closest_existing_kernel=closest)
    notes.casts = [
        f"{call.label}" + (f" at line {call.line}" if call.line is not None else "")
        for call in traced.calls.values()
        if call.family == CAST
    ]
    notes.specialized = dict(traced.specialized)
    notes.other_parameters = list(traced.other_parameters)
    notes.remarks = list(traced.notes)
    if "description" in hints:
        notes.remarks.insert(0, hints["description"])
    return notes


def _default_module_kind(traced: TracedReference, classification: Classification) -> str:
    if classification.tier == 2 and traced.parameters:
        return "norm"
    scalar_output = any(traced.shape(node) == () for node in traced.outputs)
    class_loss = any(call.name in CLASS_LOSSES for call in traced.calls.values())
    if classification.tier == 3 and (scalar_output or class_loss):
        return "loss"
    return "elementwise"


def _inputs(traced: TracedReference) -> list[TensorSpec]:
    specs = []
    for name in traced.tensor_inputs:
        if name in traced.index_inputs:
            specs.append(TensorSpec(name=name, dtype="int64", requires_grad=False))
        else:
            specs.append(TensorSpec(name=name))
    return specs


def _outputs(traced: TracedReference) -> list[OutputSpec]:
    return [OutputSpec(name=name) for name, node in zip(traced.output_names, traced.outputs)]


def _init_params(traced: TracedReference, kind: str) -> list[InitParameter]:
    if kind == "mlp":
        return [copy.deepcopy(MLP_CONFIG)]
    arguments = traced.init_params if traced.loaded.kind == "module" else traced.hyperparameters
    return [InitParameter(name=a.name, default=a.default, description=a.description) for a in arguments]


def _apply_hints(spec: Any, overrides: dict[str, Any], section: str, origin: str) -> Any:
    fields = {f.name for f in dataclasses.fields(spec)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise AnalyzeError(
            f"KERNELGEN hint '{section}' has unknown fields {unknown} (known: {sorted(fields)})", origin=origin
        )
    return dataclasses.replace(spec, **copy.deepcopy(overrides))


def _benchmark(hints: dict[str, Any], origin: str) -> BenchmarkSpec:
    spec = BenchmarkSpec(fixed_config=dict(DEFAULT_BENCHMARK_CONFIG))
    return _apply_hints(spec, hints.get("benchmark", {}), "benchmark", origin)


def _test_spec(traced: TracedReference, hints: dict[str, Any], tier: int) -> TestSpec:
    spec = TestSpec(input_domain="positive" if _needs_positive_inputs(traced) else "real")
    if tier == 2:
        # Rows of one column, where a statistic sees a single value; bf16 outputs are normalised values near 1,
        # where one bf16 ulp is already 0.8%.
        spec.cpu_shapes.append([4, 1])
        spec.gpu_shapes.append([8, 1])
        spec.tolerances["bfloat16"] = [2e-2, 2e-2]
    return _apply_hints(spec, hints.get("test", {}), "test", traced.loaded.origin)


def _needs_positive_inputs(traced: TracedReference) -> bool:
    """True when log/sqrt/rsqrt/a fractional power reads an input-dependent value that may be negative."""
    for call in traced.calls.values():
        domain_limited = call.name in _DOMAIN_OPS or (
            call.name == "pow" and len(call.operands) == 2 and is_fractional_exponent(call.operands[1])
        )
        if domain_limited and not _nonnegative(traced, call.operands[0]):
            return True
    return False


def _nonnegative(traced: TracedReference, value: Any) -> bool:
    if not isinstance(value, fx.Node):
        return isinstance(value, (int, float)) and value >= 0
    if value.op == "placeholder":
        # Float hyper-parameters under a root are epsilons in practice; tensor inputs can take any sign.
        return traced.placeholder_names.get(value) not in traced.tensor_inputs
    call = traced.calls.get(value)
    if call is None:
        return False
    operands = call.operands
    if call.family in (CAST, LAYOUT) or call.name in ("mean", "sum", "amax", "amin"):
        return bool(operands) and _nonnegative(traced, operands[0])
    if call.name in _NONNEGATIVE_OPS:
        return True
    if call.name == "pow" and len(operands) == 2:
        exponent = operands[1]
        even = is_integer_exponent(exponent) and int(exponent) % 2 == 0
        return even or _nonnegative(traced, operands[0])
    if call.name == "mul" and len(operands) == 2 and operands[0] is operands[1]:
        return True  # x * x
    if call.name in ("add", "mul", "div", "maximum"):
        return all(_nonnegative(traced, operand) for operand in operands)
    if call.name == "clamp":
        low = call.options.get("min")
        return low is not None and _nonnegative(traced, low)
    return False
