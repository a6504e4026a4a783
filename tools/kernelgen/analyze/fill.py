"""Fill a ``KernelProfile`` from a traced and classified reference (and, for tier 1, the synthesized math)."""

from __future__ import annotations

import copy
import dataclasses
import re

from typing import Any

import torch.fx as fx

from tools.kernelgen.analyze.classify import CLASS_LOSSES
from tools.kernelgen.analyze.classify import Classification
from tools.kernelgen.analyze.describe import Describer
from tools.kernelgen.analyze.describe import forward_computation
from tools.kernelgen.analyze.elementwise import activation_calls
from tools.kernelgen.analyze.elementwise import synthesize
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import is_fractional_exponent
from tools.kernelgen.analyze.ops import is_integer_exponent
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.profile import SNAKE_CASE
from tools.kernelgen.profile import Backward
from tools.kernelgen.profile import BenchmarkSpec
from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import Math
from tools.kernelgen.profile import ModuleSpec
from tools.kernelgen.profile import Reference
from tools.kernelgen.profile import TensorSpec
from tools.kernelgen.profile import TestSpec
from tools.kernelgen.profile import Tiling

DEFAULT_BENCHMARK_CONFIG = {"hidden_size": 4096}
MLP_CONFIG = HyperParameter(
    name="config",
    type="str",
    default=None,
    description="HF-style model config object: hidden_size, intermediate_size and the hyper-parameters by name",
)
TODO_TIER2 = (
    "tier 2 math is not synthesized: write math.row_statistics (statements over the masked row `x` assigning each "
    "per-row statistic, e.g. rstd), list those names in backward.saved_row_statistics, and write math.forward "
    "(assign `y`) and math.backward (read `grad_y`, assign `grad_x` and `grad_<parameter>` per parameter), "
    "as the rms_norm kernel does"
)
TODO_TIER3 = (
    "tier 3 math is not synthesized: fill the fragments templates/ops_tier3.py.j2 expects (the per-row passes "
    "over column blocks, the loss and its gradient, the hyper-parameter switches), as the cross_entropy kernel does"
)
_PRECISION_OPS = {
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "softplus", "mish",
    "logsigmoid", "erf", "sin", "cos", "div", "reciprocal", "softmax", "log_softmax", "logsumexp", "mean", "sum",
    "var", "std", "norm", "layer_norm", "rms_norm", "cross_entropy", "nll_loss",
}  # fmt: skip
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
    if "closest_existing_kernel" in hints:
        identity["closest_existing_kernel"] = hints["closest_existing_kernel"]

    profile = KernelProfile(
        operation_name=operation_name,
        tier=classification.tier,
        tier_reason=classification.reason,
        inputs=_inputs(traced),
        outputs=_outputs(traced),
        hyperparameters=[copy.deepcopy(h) for h in traced.hyperparameters],
        parameters=[copy.deepcopy(p) for p in traced.parameters],
        forward_computation=forward_computation(traced),
        tiling=_tiling(traced, classification),
        module=ModuleSpec(kind=kind, init_params=_init_params(traced, kind), size_param=traced.size_param),
        benchmark=_benchmark(hints, loaded.origin),
        reference=Reference(
            source=loaded.source,
            entry=loaded.entry,
            kind=loaded.kind,
            origin=loaded.origin if not loaded.builtin_name else f"builtin:{loaded.builtin_name}",
        ),
        test=_test_spec(traced, hints),
        **identity,
    )
    extra = _extra(traced, hints)
    if classification.tier == 1:
        _fill_tier1(profile, traced, extra)
    else:
        profile.precision_sensitive_ops = sorted(
            {call.name for call in traced.calls.values() if call.name in _PRECISION_OPS}
        )
        profile.backward = Backward(saved_tensors=list(traced.tensor_inputs) + [p.name for p in traced.parameters])
        extra["todo"] = TODO_TIER2 if classification.tier == 2 else TODO_TIER3
        profile.math = Math(extra=extra)
    return profile


def _fill_tier1(profile: KernelProfile, traced: TracedReference, extra: dict[str, Any]) -> None:
    math = synthesize(traced)
    differentiable = list(traced.tensor_inputs) + [p.name for p in traced.parameters]
    describer = Describer(traced)
    recompute = list(dict.fromkeys(describer.text(call.node) for call in activation_calls(traced)))
    profile.precision_sensitive_ops = list(math.precision_sensitive_ops)
    profile.backward = Backward(
        saved_tensors=[name for name in differentiable if name in math.backward_uses],
        recompute=recompute,
        gradient_formulas=dict(math.gradient_formulas),
    )
    extra["forward_formulas"] = dict(math.forward_formulas)
    profile.math = Math(forward=list(math.forward), backward=list(math.backward), synthesized=True, extra=extra)


def _extra(traced: TracedReference, hints: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    casts = [
        f"{call.label}" + (f" at line {call.line}" if call.line is not None else "")
        for call in traced.calls.values()
        if call.family == CAST
    ]
    if casts:
        # The reference changes precision here on purpose; the generated kernel computes in fp32 throughout.
        extra["casts"] = casts
    if traced.specialized:
        extra["specialized"] = dict(traced.specialized)
    if traced.other_parameters:
        extra["other_parameters"] = list(traced.other_parameters)
    if traced.notes:
        extra["notes"] = list(traced.notes)
    if "hidden_act" in hints:
        extra["hidden_act"] = hints["hidden_act"]
    if "description" in hints:
        extra["description"] = hints["description"]
    return extra


def _default_module_kind(traced: TracedReference, classification: Classification) -> str:
    if classification.tier == 2 and traced.parameters:
        return "norm"
    scalar_output = any(traced.shape(node) == () for node in traced.outputs)
    class_loss = any(call.name in CLASS_LOSSES for call in traced.calls.values())
    if classification.tier == 3 and (scalar_output or class_loss):
        return "loss"
    return "elementwise"


def _shape_spec(traced: TracedReference, node: Any, default: list[str]) -> list[str]:
    shape = traced.shape(node)
    if shape is None:
        return list(default)
    if shape == ():
        return []
    rank = traced.rank
    if len(shape) == rank and shape[-1] == traced.hidden:
        return ["*", "H"]
    if len(shape) == rank and shape[-1] == 1:
        return ["*", "1"]
    if len(shape) == rank - 1:
        return ["*"]
    return [str(size) for size in shape]


def _inputs(traced: TracedReference) -> list[TensorSpec]:
    placeholders = {name: node for node, name in traced.placeholder_names.items()}
    specs = []
    for name in traced.tensor_inputs:
        if name in traced.index_inputs:
            shape = _shape_spec(traced, placeholders.get(name), ["*"])
            specs.append(TensorSpec(name=name, shape=shape, dtype="int64", requires_grad=False))
        else:
            specs.append(TensorSpec(name=name, shape=_shape_spec(traced, placeholders.get(name), ["*", "H"])))
    return specs


def _outputs(traced: TracedReference) -> list[TensorSpec]:
    return [
        TensorSpec(name=name, shape=_shape_spec(traced, node, ["*", "H"]))
        for name, node in zip(traced.output_names, traced.outputs)
    ]


def _tiling(traced: TracedReference, classification: Classification) -> Tiling:
    # Parameter gradients are sums over rows: per-SM partial sums, added on the host.
    needs_sm = bool(traced.parameters)
    if classification.tier == 1:
        return Tiling(grid="rows x column blocks", block_size_source="n_cols", needs_sm_parallelism=needs_sm)
    if classification.tier == 2:
        return Tiling(grid="one program per row", block_size_source="n_cols", needs_sm_parallelism=needs_sm)
    return Tiling(grid="one program per row, looping over column blocks", needs_sm_parallelism=needs_sm)


def _init_params(traced: TracedReference, kind: str) -> list[HyperParameter]:
    if kind == "mlp":
        return [copy.deepcopy(MLP_CONFIG)]
    if traced.loaded.kind == "module":
        return [copy.deepcopy(p) for p in traced.init_params]
    return [copy.deepcopy(h) for h in traced.hyperparameters]


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


def _test_spec(traced: TracedReference, hints: dict[str, Any]) -> TestSpec:
    spec = TestSpec(input_domain="positive" if _needs_positive_inputs(traced) else "real")
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
