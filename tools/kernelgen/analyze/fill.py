"""Fill a ``KernelProfile`` from a traced and classified reference: tensors, parameters, the math as formulas."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
import warnings

from typing import Any

import sympy
import torch.fx as fx

from tools.kernelgen.analyze.classify import Classification
from tools.kernelgen.analyze.describe import forward_computation
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.formulas import lane_math
from tools.kernelgen.analyze.formulas import loss_profile_math
from tools.kernelgen.analyze.formulas import profile_math
from tools.kernelgen.analyze.formulas import written_formula
from tools.kernelgen.analyze.initial_values import held_expression
from tools.kernelgen.analyze.initial_values import names_read
from tools.kernelgen.analyze.lanes import LaneProgram
from tools.kernelgen.analyze.losses import LoweredLoss
from tools.kernelgen.analyze.losses import PerElementOutputError
from tools.kernelgen.analyze.losses import lower_loss
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import is_fractional_exponent
from tools.kernelgen.analyze.ops import is_integer_exponent
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.optional_tensors import weights_left_out
from tools.kernelgen.analyze.program import fixed_cast_dtype
from tools.kernelgen.analyze.program import variance_correction
from tools.kernelgen.analyze.refusals import refuse_unless_loss
from tools.kernelgen.analyze.shifts import Shift
from tools.kernelgen.analyze.stages import NoStagesError
from tools.kernelgen.analyze.stages import StagedLoss
from tools.kernelgen.analyze.stages import split_stages
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.analyze.trace import changes_the_output
from tools.kernelgen.analyze.trace import changes_the_parameters
from tools.kernelgen.analyze.trace import declared_rank
from tools.kernelgen.analyze.trace import names_dim
from tools.kernelgen.analyze.trace import trace_reference
from tools.kernelgen.analyze.unsqueezes import written_unsqueeze_dims
from tools.kernelgen.analyze.written import written_computation
from tools.kernelgen.broadcast import BROADCAST
from tools.kernelgen.broadcast import INSERTED
from tools.kernelgen.broadcast import pattern_rank
from tools.kernelgen.broadcast import pattern_tokens
from tools.kernelgen.derivation import elementwise_math
from tools.kernelgen.derivation import loss_math
from tools.kernelgen.derivation import row_math
from tools.kernelgen.profile import BATCH_SHARE
from tools.kernelgen.profile import CLOSEST_KERNEL_BY_TIER
from tools.kernelgen.profile import INPUT_DOMAINS
from tools.kernelgen.profile import RANDOM_INIT
from tools.kernelgen.profile import SNAKE_CASE
from tools.kernelgen.profile import Backward
from tools.kernelgen.profile import BenchmarkSpec
from tools.kernelgen.profile import HyperParameter
from tools.kernelgen.profile import InitParameter
from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import LossChoice
from tools.kernelgen.profile import ModuleSpec
from tools.kernelgen.profile import Notes
from tools.kernelgen.profile import OutputSpec
from tools.kernelgen.profile import ProfileError
from tools.kernelgen.profile import Reference
from tools.kernelgen.profile import TensorSpec
from tools.kernelgen.profile import TestSpec
from tools.kernelgen.profile import Tiling

DEFAULT_BENCHMARK_CONFIG = {"hidden_size": 4096}
MLP_CONFIG = InitParameter(
    name="config",
    default=None,
    description="HF-style model config object: hidden_size, intermediate_size and the hyper-parameters by name",
)
# The values a str hyper-parameter that picks a loss's reduction may take (each is traced to see what it does).
REDUCTION_WORDS = ("mean", "sum", "none", "batchmean")
# Losses run on [rows, classes]: CPU shapes include a vocabulary longer than one chunk of the kernel (16384
# classes at most by default).
LOSS_CPU_SHAPES = [[3, 127], [6, 509], [2, 20000]]
LOSS_GPU_SHAPES = [[4096, 32000], [333, 128256]]
_DOMAIN_OPS = ("log", "log1p", "sqrt", "rsqrt")
_NONNEGATIVE_OPS = {"exp", "sigmoid", "softplus", "relu", "abs", "square", "sqrt", "rsqrt", "softmax", "var", "std"}
_NONNEGATIVE_OPS |= {"norm", "softmin"}
# Hinted names of the reference's own classes: they only apply under its natural name (closest_existing_kernel,
# hinted, applies under any name).
_HINTED_IDENTITY = ("function_class_name", "module_class_name", "functional_name")
# How far an int hyper-parameter is moved to see whether a shift pads with it (any value but the default).
_PAD_MOVED_BY = 7


def snake_case(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_") or "kernel"


def build_profile(
    traced: TracedReference, classification: Classification, name: str | None, lanes: LaneProgram | None = None
) -> KernelProfile:
    """``lanes``: the reference lowered to lanes (it moves elements within the row), for a tier-1 profile."""
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
            function=str(hints.get("module_function", "")) if loaded.kind == "function" else "",
        ),
        benchmark=_benchmark(hints, loaded.origin),
        backward=_apply_hints(Backward(), hints.get("backward", {}), "backward", loaded.origin),
        tiling=_apply_hints(Tiling(), hints.get("tiling", {}), "tiling", loaded.origin),
        reference=Reference(
            source=loaded.source,
            entry=loaded.entry,
            kind=loaded.kind,
            origin=loaded.origin if not loaded.builtin_name else f"builtin:{loaded.builtin_name}",
        ),
        test=_test_spec(traced, hints, classification.tier, lanes.lanes if lanes else 1),
        notes=notes,
        **identity,
    )
    if lanes is not None:  # an index map's broadcast inputs: unsqueezed as written at any rank, literal dims too
        written = written_unsqueeze_dims(traced)
        for spec in profile.inputs:
            if spec.broadcast and not spec.unsqueeze and written.get(spec.name, "").lstrip("-").isdigit():
                spec.unsqueeze = written[spec.name]
    laid_out = any(spec.unsqueeze or INSERTED in pattern_tokens(spec.broadcast) for spec in profile.inputs)
    if classification.tier in (1, 2) and (lanes is not None or laid_out):
        # Index maps and inputs the reference lays out itself read as its code writes them: the trace has slices at
        # computed bounds (``slice(q, index=(Ellipsis, slice(floordiv_1, ...``) and drops the unsqueezes.
        own = written_computation(loaded.source, loaded.entry, loaded.kind, traced.output_names)
        profile.forward_computation = own or profile.forward_computation
    refuse_unless_loss(traced, classification)
    lowered, staged = None, None
    if classification.tier == 3:
        _refuse_learnable_parameters(traced)
        _switches_as_hyperparameters(profile, traced)  # self.ignore_index: what the lowering reads as one
        # Inputs the trace could not shape as per-token (advantages per sequence): per-element guesses would make
        # a per-sequence sum look like a row sum; the split probes their shapes itself.
        unshaped = not traced.shapes_known
        lowered, staged = _lowered_loss(traced, split_first=bool(traced.broadcast_inputs) or unshaped)
    if traced.broadcast_inputs and classification.tier == 3 and staged is None:
        names = ", ".join(traced.broadcast_inputs)
        raise AnalyzeError(
            f"{names} broadcast{'s' if len(traced.broadcast_inputs) == 1 else ''} against {traced.tensor_inputs[0]}, "
            f"which element-wise and row kernels take but this reference is tier 3 ({classification.reason.rstrip('.')})",
            origin=loaded.origin,
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
        _refuse_boolean_inputs(traced)
        # An int the host reads to insert a broadcast input's dim (``unsqueeze_dim``) takes any value at run time.
        host_read = {t.unsqueeze for t in profile.inputs if t.unsqueeze}
        for hp in profile.hyperparameters:
            if hp.name in host_read:
                profile.notes.specialized.pop(hp.name, None)
            elif hp.name in traced.specialized and hp.type in ("int", "bool", "str") and not hp.choices:
                hp.choices = [hp.default]  # traced with this value only: the Function refuses others
        profile.math, program = profile_math(traced) if lanes is None else lane_math(traced, lanes)
        if classification.tier == 1:
            profile.math.rounding = str(hints.get("rounding", profile.math.rounding))
        for output in profile.outputs:
            output.keepdim = program.keepdim[output.name]
        derive = elementwise_math if classification.tier == 1 else row_math
        notes.gradient_formulas = dict(derive(profile, profile.reference.origin).gradient_formulas)
    elif staged is not None:
        _fill_staged_loss(profile, traced, staged, lowered)
    else:
        _fill_loss(profile, traced, lowered or lower_loss(traced))
    if classification.tier == 3:
        _shifted_targets(profile, traced)
    if traced.channel_groups is not None:
        _fill_groups(profile, traced, classification)
    elif classification.tier == 2 and traced.rank >= 2 and names_dim(traced.calls, traced.rank - 1):
        # dim=1 of [rows, columns], dim=2 of [B, T, H]: the row only at that rank.
        first, rank = traced.tensor_inputs[0], traced.rank
        declared = traced.loaded.hints.get("shapes", {}).get(first)
        if declared is not None and declared_rank(declared) not in (0, rank):
            # The hint says the input has more dims: the dim the reference reduces is not its last (a head's).
            raise AnalyzeError(
                f"the reference reduces dim {rank - 1} of {first}, which the shapes hint declares "
                f"{declared!r}: a dim other than its last, and kernelgen's row kernels reduce the last dim; move that "
                "dim last (transpose it where the kernel is called) or reduce dim=-1",
                origin=traced.loaded.origin,
            )
        profile.math.input_rank = rank
        for shapes in (profile.test.cpu_shapes, profile.test.gpu_shapes):  # the tier's [rows, columns] extras too
            shapes[:] = [[1] * (rank - len(shape)) + list(shape) for shape in shapes]
        written = "is [rows, columns]" if rank == 2 else f"has {rank} dims"
        profile.notes.remarks.append(
            f"shape: {first} {written}: the reference reduces its dim {rank - 1}, the row only at {rank} dims (on "
            f"more, another dim); the kernel refuses other ranks"
        )
    profile.module.fixed = _fixed_arguments(profile, traced)
    profile.notes.remarks += _optional_argument_remarks(traced)
    # A random initialisation has no profile spelling: the module starts the parameter at ones, and says so.
    profile.notes.remarks += [
        f"init: the reference draws {param.name} at random; the generated module starts it at ones (load trained "
        "values into it, or change its initialisation)"
        for param in profile.parameters
        if param.description == RANDOM_INIT
    ]
    return profile


def _optional_argument_remarks(traced: TracedReference) -> list[str]:
    """A remark for each argument defaulting to None that reaches a call only as ``weight=`` (``F.nll_loss(...,
    weight=class_weight)``: traced at None, the kernel computes without it and takes no such argument), and for each
    that became a tensor input (the kernel takes it always)."""
    loaded = traced.loaded
    function = loaded.obj.forward if loaded.kind == "module" else loaded.obj
    try:
        optional = [p.name for p in inspect.signature(function).parameters.values() if p.default is None]
    except (TypeError, ValueError):
        return []
    remarks = [
        f"interface: {name} (None by default) reaches {call} only as {keyword}= (line {line}): traced at None, the "
        f"kernel computes without it and takes no {name}; give it no default to make it a tensor input"
        for name, call, keyword, line in weights_left_out(loaded.source, loaded.entry, loaded.kind, optional)
    ]
    # The other way round (Mamba2's gated norm, forward(x, gate=None)): read as a tensor, so an input the kernel
    # always takes; the reference's path without it is not generated.
    inputs = set(traced.tensor_inputs)
    remarks += [
        f"interface: {name} (None by default) is read as a tensor: the kernel takes it always, and the reference's "
        f"path without it is not generated"
        for name in optional
        if name in inputs
    ]
    return remarks


def _shifted_targets(profile: KernelProfile, traced: TracedReference) -> None:
    """Each shifted target's pad value (analyze/shifts.py): the int hyper-parameter passed there
    (``value=ignore_index``), which the host then reads at run time, else the int written (``value=-100``)."""
    for shift in traced.shifts:
        spec = next(spec for spec in profile.inputs if spec.name == shift.input)
        hyper = _padded_with(profile, traced, shift)
        spec.shift = hyper.name if hyper else str(shift.value)
        if hyper is not None and hyper.choices == [hyper.default]:
            hyper.choices = None  # traced at its default, but the host reads it as any value
            profile.notes.specialized.pop(hyper.name, None)
        profile.notes.remarks.append(
            f"interface: {shift.input} is shifted one token left as the reference does (line {shift.line}), the last "
            f"token of each sequence reading {spec.shift}: pass it unshifted, the Function shifts it before the kernel"
        )
        profile.forward_computation += f", {shift.input} shifted one token left (the last token reading {spec.shift})"


def _padded_with(profile: KernelProfile, traced: TracedReference, shift: Shift) -> HyperParameter | None:
    """The int hyper-parameter a shift pads with: fx saw only its value, so the reference is traced again with it
    moved, where the pad value moves with it (a ``value=-100`` written beside an ``ignore_index=-100`` stays)."""
    for hp in profile.hyperparameters:
        if hp.type != "int" or hp.default != shift.value:
            continue
        moved = hp.default + _PAD_MOVED_BY
        try:
            shifts = trace_reference(traced.loaded, {hp.name: moved}).shifts
        except Exception:  # noqa: BLE001 - the reference fails at that value: its pad is not read from it
            continue
        if any(other.input == shift.input and other.value == moved for other in shifts):
            return hp
    return None


def _fill_groups(profile: KernelProfile, traced: TracedReference, classification: Classification) -> None:
    """Rows of groups of channels (analyze/groups.py): the number of groups a runtime int, the per-channel
    parameters read at each element's channel, test shapes ``[batch, channels, rest]`` whose channels split."""
    groups = traced.channel_groups
    if classification.tier != 2:
        raise AnalyzeError(
            f"the reference regroups {traced.tensor_inputs[0]} into groups of channels, and {classification.reason}",
            origin=traced.loaded.origin,
        )
    profile.math.groups = groups.hyper
    profile.notes.tier_reason = (
        f"statistics over groups of the channels (dim 1) of {traced.tensor_inputs[0]}, {groups.hyper} of them: each "
        f"group of a sample is a row; {classification.reason}"
    )
    if groups.written_as:  # the layer norm of the row is what the reference's call computes over each group
        profile.notes.tier_reason = profile.notes.tier_reason.replace("`F.layer_norm`", f"`{groups.written_as}`")
        profile.forward_computation = re.sub(
            r"layer_norm\((\w+), normalized_shape=\1\.shape\[-\d+:\], ",
            rf"group_norm(\1, {groups.hyper}={groups.hyper}, ",
            profile.forward_computation,
        )
    hyper = next((hp for hp in profile.hyperparameters if hp.name == groups.hyper), None)
    if hyper is None:
        hyper = HyperParameter(name=groups.hyper, type="int", default=groups.count)
        profile.hyperparameters.insert(0, hyper)
    hyper.type, hyper.default, hyper.constexpr, hyper.choices = "int", groups.count, False, None
    for param in profile.parameters:
        if (param.attribute or param.name) in groups.parameters:
            param.shape, param.rank = "group", None
    count = groups.count
    if "test" not in traced.loaded.hints:
        # A reference written for [batch, channels, height, width] (``B, C, H, W = x.shape``) runs at its rank.
        extra = max(0, traced.rank - 3)
        profile.test.cpu_shapes = [
            [2, 2 * count, *[3] * extra, 5],
            [1, count, *[1] * extra, 33],
            [3, 3 * count, *[2] * extra, 7],
        ]
        profile.test.gpu_shapes = [[4, 8 * count, *[1] * extra, 4096], [2, 16 * count, *[4] * extra, 1023]]


def _fixed_arguments(profile: KernelProfile, traced: TracedReference) -> list[str]:
    """A module reference's constructor arguments that reach neither the kernel's hyper-parameters nor its
    parameters (size, initial value, switch) and whose other values change what the reference computes: the trace
    saw their defaults only. Arguments that change nothing (``inplace=False``) are left out. So are arguments that
    set a parameter's initial value or whether it learns otherwise than as its ``init_arg`` (``log(expm1(init))``,
    ``requires_grad=learnable``), hyper-parameters included: the generated module starts its parameters at the
    values the defaults give."""
    if traced.loaded.kind != "module" or profile.module.kind == "mlp":
        return []
    inputs = {t.name for t in profile.inputs}
    used = {profile.module.size_param, *(hp.name for hp in profile.hyperparameters), *inputs}
    used |= {p.init_arg for p in profile.parameters} | {p.enabled_by for p in profile.parameters}
    # Arguments the module's own starting values and held class weights read, written as the reference writes them.
    used |= {name for t in [*profile.parameters, *profile.inputs] for name in names_read(getattr(t, "init_expr", ""))}
    fixed = []
    # A loss's targets drawn as class indices in the probes (an ignore_index held in a submodule changes only those).
    class_indices = tuple(t.name for t in profile.inputs if t.dtype == "int64")
    for ip in profile.module.init_params:
        if ip.default is None:
            # Traced at None: a number that changes what the reference computes is one the kernel never saw.
            if ip.name not in used and changes_the_output(traced.loaded, ip.name, None, class_indices):
                fixed.append(ip.name)
            continue
        if not isinstance(ip.default, (bool, int, float, str)):
            continue
        if ip.name not in used and changes_the_output(traced.loaded, ip.name, ip.default, class_indices):
            fixed.append(ip.name)
        elif ip.name != profile.module.size_param and ip.name not in inputs:
            linked = {
                p.attribute or p.name
                for p in profile.parameters
                if ip.name in (p.init_arg, p.enabled_by) or ip.name in names_read(p.init_expr)
            }
            if changes_the_parameters(traced.loaded, ip.name, ip.default, linked):
                fixed.append(ip.name)
    return fixed


def _lowered_loss(traced: TracedReference, split_first: bool) -> tuple[LoweredLoss | None, StagedLoss | None]:
    """A loss as one kernel when its rows reduce to it by a sum or a mean, else as two stages (``stages.py``):
    the per-token statistics, lowered, and the math after them. Where the split finds no stages, the refusal is
    the one kernel's (it names the op that reduces rows otherwise). ``split_first``: an input broadcasts against
    the logits (advantages per sequence), which only a sequence stage takes; without stages it is refused after."""
    if split_first:
        try:
            staged = split_stages(traced)
        except NoStagesError as no_stages:
            if not no_stages.reason:
                return None, None
            try:
                return lower_loss(traced), None
            except PerElementOutputError:
                raise
            except AnalyzeError as single:
                raise _with_stages_reason(single, no_stages) from None
        return lower_loss(staged.vocabulary), staged
    try:
        return lower_loss(traced), None
    except PerElementOutputError:
        raise
    except AnalyzeError as error:
        single = error
    try:
        staged = split_stages(traced)
    except NoStagesError as no_stages:
        raise _with_stages_reason(single, no_stages) from None
    return lower_loss(staged.vocabulary), staged


def _with_stages_reason(single: AnalyzeError, no_stages: NoStagesError) -> AnalyzeError:
    """The one kernel's refusal, with why no sequence stage takes the math it refuses where the split says (a
    second [B, T, V] input), else as it is."""
    return AnalyzeError(f"{single}; {no_stages.reason}") if no_stages.reason else single


def _fill_loss(profile: KernelProfile, traced: TracedReference, lowered: LoweredLoss) -> None:
    """Tier 3: the loss's math, which inputs take gradients, what tests draw, the reduction's choices."""
    _switches_as_hyperparameters(profile, traced)
    if list(lowered.outputs) == ["y"]:
        lowered.outputs = {"loss": lowered.outputs["y"]}
        profile.outputs[0].name = "loss"
    profile.math = loss_profile_math(traced, lowered)
    if lowered.upcast[0]:  # the loss is computed in fp32 (its extras are returned alike)
        for output in profile.outputs:
            output.dtype = "float32"
    chooser, accepted = _reduction_choices(traced, lowered)
    for hp in profile.hyperparameters:
        if hp.name in lowered.int_hyperparameters:
            hp.constexpr = False  # read by the math (ignore_index): a runtime value
            profile.notes.specialized.pop(hp.name, None)
        elif hp.name == chooser:
            hp.choices = list(accepted)
        elif hp.name in traced.specialized and hp.type in ("int", "bool", "str"):
            hp.choices = [hp.default]  # traced with this value only (a log_softmax's dim): the kernel refuses others
    if chooser:
        _set_reduction_choices(profile, traced, chooser, accepted)
    hints = traced.loaded.hints
    element = [t for t in profile.inputs if t.dtype != "int64" and not t.per_class and not t.per_row]
    # Every [rows, classes] input takes a gradient, as autograd gives one to each input that asks (a distillation
    # loss's teacher, a soft target); the kernel writes one only where its input requires grad at run time.
    hinted = hints.get("grad_inputs")
    wanted = hinted or [t.name for t in element if t.name not in detached_inputs(traced)]
    per_class = sorted(set(wanted) & set(traced.class_inputs))
    if per_class:
        raise AnalyzeError(
            f"KERNELGEN hint 'grad_inputs' names {per_class}, one value per class (class weights): their gradient "
            f"would sum over rows, which a tier-3 kernel does not derive",
            origin=traced.loaded.origin,
        )
    positive = _log_domain_inputs(lowered, traced)
    # A per-row input a mean divides by the sum of (a float token mask): drawn positive, as a mask's count is.
    denominators = [profile.math.loss.denominator] + [c.denominator for c in profile.math.loss.choices]
    denominators += [scale.denominator for scale in profile.math.loss.scales]
    positive |= {name for name in traced.row_inputs if any(re.search(rf"\b{name}\b", d) for d in denominators)}
    # Class weights are drawn positive: a weighted mean divides by the kept rows' weights.
    domains = {**{name: "positive" for name in traced.class_inputs}, **_distribution_inputs(traced)}
    domains.update(dict.fromkeys(_log_probability_rows(lowered, traced), "log_probabilities"))
    domains.update(hints.get("domains", {}))
    per_row = [t for t in profile.inputs if t.per_row]
    for tensor in element + [t for t in profile.inputs if t.per_class] + per_row:
        tensor.requires_grad = tensor.name in wanted
        tensor.domain = domains.get(tensor.name, "positive" if tensor.name in positive else "real")
        if tensor.domain not in INPUT_DOMAINS:
            raise AnalyzeError(
                f"KERNELGEN hint 'domains': {tensor.domain!r} is not one of {INPUT_DOMAINS[1:]}",
                origin=traced.loaded.origin,
            )
    # A per-row input the reference selects by (``torch.where(mask, ...)``) is a boolean mask; a [rows, classes] one
    # is taken as numbers, as element-wise kernels take it.
    for tensor in per_row:
        if tensor.name in traced.conditions:
            tensor.dtype, tensor.domain = "bool", "real"
    _refuse_boolean_inputs(traced, [t.name for t in element], "loss kernels take [rows, classes] inputs as numbers")
    unknown = sorted(set(wanted) - {t.name for t in element})
    if unknown:
        raise AnalyzeError(
            f"KERNELGEN hint 'grad_inputs' names {unknown}, which are no [rows, classes] inputs"
            + (" (a per-row input takes no gradient)" if set(unknown) & {t.name for t in per_row} else ""),
            origin=traced.loaded.origin,
        )
    if per_row:
        names = ", ".join(t.name for t in per_row)
        profile.notes.remarks.append(
            f"per-row inputs: {names}, one value per row ([rows] or the leading dims of {element[0].name}), loaded "
            f"once per row; no gradient is derived for them (the Function refuses them requiring grad, its backward "
            f"returns None for them)"
        )
    profile.module.kind = "loss"
    if "y" not in lowered.outputs:
        profile.forward_computation = re.sub(r"(^|; )y = ", r"\1loss = ", profile.forward_computation)
    try:
        math = loss_math(profile, profile.reference.origin)
    except ProfileError as error:
        if hinted or len(element) == 1:
            raise
        # A gradient the derivation cannot write for an input after the first: that input takes none (asked for
        # one, the Function says so), as the first input's gradient alone is what a loss usually needs.
        for tensor in element[1:]:
            tensor.requires_grad = False
        math = loss_math(profile, profile.reference.origin)
        names = ", ".join(t.name for t in element[1:])
        profile.notes.remarks.append(f"no gradient derived for {names}: {error.problems[0]}")
    profile.notes.gradient_formulas = dict(math.gradient_formulas)


def _fill_staged_loss(
    profile: KernelProfile, traced: TracedReference, staged: StagedLoss, lowered: LoweredLoss
) -> None:
    """The profile of a loss in two stages: ``math`` of the per-token statistics (its outputs), the sequence stage's
    source, the inputs only it reads with their shapes, and the gradient formulas of the statistics."""
    profile.math = loss_profile_math(staged.vocabulary, lowered)
    profile.math.loss.sequence = staged.sequence_source
    profile.math.loss.sequence_groups = staged.groups
    profile.outputs = [OutputSpec(name=name, keepdim=False) for name in staged.statistics]
    for tensor in profile.inputs:
        tensor.per_row = False
        if tensor.name in staged.sequence_inputs:
            tensor.sequence_shape = staged.sequence_inputs[tensor.name]
            tensor.requires_grad, tensor.broadcast = False, ""
            tensor.domain = "log_probabilities" if tensor.name in staged.log_probability_inputs else "real"
            tensor.domain = "mask" if tensor.name in staged.mask_inputs else tensor.domain
            tensor.dtype = "bool" if tensor.name in staged.conditions else tensor.dtype
        elif tensor.dtype != "int64":
            tensor.requires_grad = True
            tensor.domain = "real"
    profile.module.kind = "loss"
    for hp in profile.hyperparameters:
        vocabulary = hp.name in lowered.int_hyperparameters or hp.name not in staged.vocabulary_ints
        if hp.name in staged.int_values and vocabulary:
            hp.constexpr = False  # a value to both stages (ignore_index): any at run time
            profile.notes.specialized.pop(hp.name, None)
        elif hp.name in traced.specialized and hp.type in ("int", "bool", "str") and not hp.choices:
            hp.choices = [hp.default]  # traced with this value only: the Function refuses others in one line
    # The probe ran the reference on inputs of these shapes: the trace's guesses are void.
    profile.notes.remarks = [r for r in profile.notes.remarks if not r.startswith("running the reference on example")]
    profile.test.cpu_shapes = [[2, 3, 127], [2, 2, 20000]]
    profile.test.gpu_shapes = [[8, 1024, 32000], [4, 512, 128256]]
    names = ", ".join(staged.statistics)
    profile.notes.remarks.append(
        f"two stages: a kernel streams each row of {traced.tensor_inputs[0]} once for the per-token statistics "
        f"({names}) and writes d {traced.tensor_inputs[0]} from their adjoints; the math after them (math.loss."
        f"sequence) runs as PyTorch, whose autograd gives the adjoints"
    )
    try:
        profile.notes.gradient_formulas = dict(loss_math(profile, profile.reference.origin).gradient_formulas)
    except ValueError as error:
        raise _underivable_statistics(staged, traced, str(error).split("math: ", 1)[-1]) from None


def _underivable_statistics(staged: StagedLoss, traced: TracedReference, why: str) -> AnalyzeError:
    """A per-token statistic whose gradient the loss synthesis cannot write, named at the reference's line."""
    output = next(node for node in staged.vocabulary.graph_module.graph.nodes if node.op == "output")
    lines = [node_line(node) for node in output.all_input_nodes]
    line = next((line for line in lines if line), None)
    origin = traced.loaded.origin
    return AnalyzeError(
        f"the per-token statistics ({', '.join(staged.statistics)}) of a loss in two stages: {why}",
        origin=f"{origin}:{line}" if line else origin,
    )


def _switches_as_hyperparameters(profile: KernelProfile, traced: TracedReference) -> None:
    """A loss module's ``self.reduction`` / ``self.ignore_index``: hyper-parameters of the kernel, as the arguments
    of a loss function are (the trace saw their defaults)."""
    for hp in _traced_switches(traced):
        profile.hyperparameters.append(copy.deepcopy(hp))
        profile.notes.specialized[hp.name] = traced.specialized[hp.name]


def _traced_switches(traced: TracedReference) -> list[HyperParameter]:
    """The module switches of ``traced`` made its hyper-parameters (in place); returns the new ones."""
    known = {hp.name for hp in traced.hyperparameters}
    defaults = {ip.name: ip.default for ip in traced.init_params}
    added = []
    for name, value in traced.module_switches.items():
        if name in known:
            continue
        kind = {bool: "bool", int: "int", str: "str"}[type(value)]
        hp = HyperParameter(name=name, type=kind, default=defaults.get(name, value), constexpr=kind != "int")
        traced.hyperparameters.append(hp)
        traced.specialized[name] = value
        added.append(hp)
    return added


def _reduction_choices(traced: TracedReference, lowered: LoweredLoss) -> tuple[str | None, dict]:
    """The str hyper-parameter that picks the reduction, and what each of its values does: the reference is traced
    again with each other reduction name; a value counts when the per-row math stays the same. A loss adding means
    over different counts keeps the reduction it was traced with (the kernel refuses the others): its rows carry
    each count's share, which another reduction would not."""
    if lowered.scales:
        return None, {}
    for hp in traced.hyperparameters:
        if hp.type != "str" or hp.name not in traced.specialized or hp.default not in REDUCTION_WORDS:
            continue
        accepted = {hp.default: (lowered.reduction, lowered.denominator)}
        for value in REDUCTION_WORDS:
            if value in accepted:
                continue
            try:
                with warnings.catch_warnings():  # torch's notes on the other reductions (kl_div's "mean")
                    warnings.simplefilter("ignore")
                    retraced = trace_reference(traced.loaded, {hp.name: value})
                    _traced_switches(retraced)  # ignore_index a hyper-parameter there too, as in ``lowered``
                    other = lower_loss(retraced)
            except AnalyzeError:
                continue
            same_rows = other.statistics == lowered.statistics and list(other.outputs.values()) == list(
                lowered.outputs.values()
            )
            if same_rows:
                accepted[value] = (other.reduction, other.denominator)
        # A value that does what another value does under its own name (an unknown word falling through to
        # the reference's "none" branch) is left out.
        named = {value: result for value, result in accepted.items() if value == result[0]}
        accepted = {
            value: result
            for value, result in accepted.items()
            if value == hp.default or value == result[0] or result not in named.values()
        }
        if len(set(accepted.values())) > 1:
            return hp.name, accepted
    return None, {}


def _set_reduction_choices(profile: KernelProfile, traced: TracedReference, chooser: str, accepted: dict) -> None:
    names = [t.name for t in profile.inputs if t.dtype == "int64" or t.per_class or t.per_row]
    names += profile.formula_hyperparameters + ["n_cols", BATCH_SHARE]
    means = [denominator for kind, denominator in accepted.values() if kind == "mean"]
    base = accepted["mean"][1] if accepted.get("mean", ("",))[0] == "mean" else (means[0] if means else 1)
    loss = profile.math.loss
    loss.reduction = chooser
    loss.denominator = written_formula(base, names, traced)
    loss.choices = [
        LossChoice(value=value, reduction=kind, denominator=written_formula(denominator, names, traced))
        for value, (kind, denominator) in accepted.items()
        if value != kind or (kind == "mean" and denominator != base)
    ]


def _distribution_inputs(traced: TracedReference) -> dict[str, str]:
    """Inputs ``F.kl_div`` takes as they are: its input is log-probabilities, its target log-probabilities
    (``log_target=True``) or probabilities; a binary cross entropy's target, and its input where it takes
    probabilities, are values in [0, 1] (torch refuses others): drawn as probabilities. Tests draw them so; any other
    tensor is a row of real values."""
    found = {}
    for call in traced.calls.values():
        if call.name in ("kl_div", "kl_div_pointwise"):
            target_domain = "log_probabilities" if call.options.get("log_target") else "probabilities"
            domains = ("log_probabilities", target_domain)
        elif call.name in ("bce_pointwise", "binary_cross_entropy"):
            domains = ("probabilities", "probabilities")
        elif call.name in ("bce_with_logits_pointwise", "binary_cross_entropy_with_logits"):
            domains = (None, "probabilities")  # logits: any real number
        elif call.name == "cross_entropy" and getattr(call.operands[-1], "target", None) not in traced.index_inputs:
            domains = (None, "probabilities")  # a probability target (analyze/roles.py)
        else:
            continue
        for operand, domain in zip(call.operands, domains):
            if domain is None:
                continue
            if getattr(operand, "op", None) == "placeholder" and operand.target in traced.tensor_inputs:
                found.setdefault(operand.target, domain)
    return found


def _log_probability_rows(lowered: LoweredLoss, traced: TracedReference) -> set[str]:
    """Per-row inputs the loss subtracts from a statistic or a statistic from them (``logp - old_logp``, a ratio of
    an old policy's probability to the picked one): log-probabilities of the picked class, which tests draw near the
    picked log-probability of their logits, so that a clipped ratio reaches each of its branches."""
    statistics = [sympy.Symbol(name, real=True) for name, _, _ in lowered.statistics]
    found = set()
    for expr in lowered.outputs.values():
        for node in sympy.preorder_traversal(expr):
            if not isinstance(node, sympy.Add):
                continue
            coefficients = node.as_coefficients_dict()
            for name in traced.row_inputs:
                weight = coefficients.get(sympy.Symbol(name, real=True))
                if weight is not None and any(coefficients.get(s) == -weight for s in statistics):
                    found.add(name)
    return found


def _log_domain_inputs(lowered: LoweredLoss, traced: TracedReference) -> set[str]:
    """Inputs the math takes the log (or a root) of directly: tests draw them positive."""
    found = set()
    exprs = [operand for _, _, operand in lowered.statistics] + list(lowered.outputs.values())
    for expr in exprs:
        for node in sympy.preorder_traversal(expr):
            limited = isinstance(node, sympy.log) or (isinstance(node, sympy.Pow) and not node.exp.is_Integer)
            if limited:
                # The input itself or a multiple of it (log(target), sqrt(2 * x)), not a softmax of it; also kept
                # off 0 by a constant (log(target + 1e-9)).
                terms = [t for t in sympy.Add.make_args(node.args[0]) if not (t.is_number and t.is_nonnegative)]
                for factor in sympy.Mul.make_args(terms[0]) if len(terms) == 1 else ():
                    if isinstance(factor, sympy.Symbol) and factor.name in traced.tensor_inputs:
                        found.add(factor.name)
    return found


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
    return "loss" if classification.tier == 3 else "elementwise"


# Tensor annotations that say "integer values": such an input is an index (a class target), never float math.
INTEGER_TENSOR_TYPES = ("LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")


def integer_annotations(loaded) -> dict[str, str]:
    """``{argument: "torch.LongTensor"}`` for the entry's tensor arguments annotated with an integer tensor type."""
    function = loaded.obj.forward if loaded.kind == "module" else loaded.obj
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}
    found = {}
    for name, parameter in parameters.items():
        annotation = parameter.annotation
        if isinstance(annotation, str):  # ``from __future__ import annotations``: the text names the type
            text = annotation.replace(" ", "")
            hit = next((t for t in INTEGER_TENSOR_TYPES if text.endswith(f".{t}") or text == t), None)
        else:
            module = getattr(annotation, "__module__", "") or ""
            hit = getattr(annotation, "__name__", "") if module.startswith("torch") else None
            hit = hit if hit in INTEGER_TENSOR_TYPES else None
        if hit:
            found[name] = f"torch.{hit}"
    return found


# Ops whose result carries no gradient: a detach, and comparisons and masks (booleans, as torch makes them).
_GRADIENT_STOPS = {"detach", "gt", "ge", "lt", "le", "eq", "ne", "logical_not", "logical_and", "logical_or", "bool"}


def _stops_gradients(call) -> bool:
    dtype = fixed_cast_dtype(call) if call.family == CAST else None
    return call.name in _GRADIENT_STOPS or (dtype is not None and not dtype.is_floating_point)


def detached_inputs(traced: TracedReference) -> set[str]:
    """Tensor inputs every path of which to the outputs passes a ``.detach()`` (a distillation's teacher), a
    comparison (``torch.where(mask != 0, ...)``) or a cast to integers: no gradient reaches them, as torch gives them
    none."""
    reached, stack = set(), list(traced.outputs)
    while stack:
        node = stack.pop()
        if node in reached:
            continue
        reached.add(node)
        call = traced.calls.get(node)
        if call is None or not _stops_gradients(call):
            stack.extend(node.all_input_nodes)
    names = {traced.placeholder_names.get(node, str(node.target)) for node in reached if node.op == "placeholder"}
    return set(traced.tensor_inputs) - names


def _inputs(traced: TracedReference) -> list[TensorSpec]:
    integers = integer_annotations(traced.loaded)
    distributions = _distribution_inputs(traced)  # an element-wise KL's or binary cross entropy's operands
    unsqueezed = {
        name: dim
        for name, dim in written_unsqueeze_dims(traced).items()
        if any(h.name == dim and h.type == "int" for h in traced.hyperparameters)
    }
    specs, detached = [], detached_inputs(traced)
    for name in traced.tensor_inputs:
        if name in traced.index_inputs:
            specs.append(TensorSpec(name=name, dtype="int64", requires_grad=False))
        elif name in traced.class_inputs:
            attribute = traced.attribute_inputs.get(name, "")
            spec = TensorSpec(name=name, requires_grad=False, per_class=True, attribute=attribute)
            if attribute and traced.loaded.kind == "module":
                constructor = {ip.name for ip in traced.init_params}
                held = held_expression(traced.loaded.source, traced.loaded.entry, attribute, constructor)
                spec.init_expr = held or ""
            specs.append(spec)
        elif name in traced.row_inputs:
            specs.append(TensorSpec(name=name, requires_grad=False, per_row=True))
        elif name in integers:
            function = traced.loaded.obj.forward if traced.loaded.kind == "module" else traced.loaded.obj
            line = getattr(getattr(function, "__code__", None), "co_firstlineno", None)
            raise AnalyzeError(
                f"input '{name}' is annotated {integers[name]}, but it is used as a number, not as an index: "
                f"kernelgen's element-wise and row kernels compute on floating-point tensors (annotate it "
                f"torch.Tensor and pass floats, or index with it)",
                origin=traced.loaded.origin,
                line=line,
            )
        else:
            broadcast = traced.broadcast_inputs.get(name, "")
            spec = TensorSpec(name=name, domain=distributions.get(name, ""), broadcast=broadcast)
            spec.requires_grad = name not in detached
            spec.unsqueeze = unsqueezed.get(name, "")
            specs.append(spec)
    return specs


def _refuse_boolean_inputs(
    traced: TracedReference,
    names: list[str] | None = None,
    kernels: str = "element-wise and row kernels take floating-point tensors",
) -> None:
    """An input (of ``names``, else any) the reference selects by (``torch.where(mask, ...)``, ``masked_fill(pad,
    ...)``, ``~pad``) is refused, saying how to pass it as numbers."""
    masks = [name for name in traced.conditions if names is None or name in names]
    if masks:
        name = masks[0]
        placeholder = next(node for node, known in traced.placeholder_names.items() if known == name)
        lines = [node_line(user) for user in placeholder.users if node_line(user) is not None]
        raise AnalyzeError(
            f"input '{name}' is a boolean mask the reference selects by; {kernels}: take it as a float mask and "
            f"select by '{name} != 0'",
            origin=traced.loaded.origin,
            line=min(lines) if lines else None,
        )


def _refuse_learnable_parameters(traced: TracedReference) -> None:
    """Loss kernels derive the gradients of their tensor inputs only: a learnable parameter the loss reads (CLIP's
    ``logit_scale``) is refused by the line that reads it."""
    if not traced.parameters:
        return
    reads = [n for n in traced.graph_module.graph.nodes if n.op == "get_attr" and n.target in traced.parameter_names]
    name = traced.parameters[0].name
    line = next((node_line(n) for n in reads if traced.parameter_names[n.target] == name), None)
    raise AnalyzeError(
        f"the loss reads the learnable parameter '{name}'; loss kernels derive the gradients of their tensor inputs "
        f"only: apply it to the logits before the loss, or hold a constant as a float "
        f"hyper-parameter",
        origin=traced.loaded.origin,
        line=line,
    )


def _outputs(traced: TracedReference) -> list[OutputSpec]:
    return [OutputSpec(name=name) for name, node in zip(traced.output_names, traced.outputs)]


def _init_params(traced: TracedReference, kind: str) -> list[InitParameter]:
    if kind == "mlp":
        return [copy.deepcopy(MLP_CONFIG)]
    arguments = traced.init_params if traced.loaded.kind == "module" else traced.hyperparameters
    none_defaults = _none_defaults(traced.loaded.obj.__init__ if traced.loaded.kind == "module" else traced.loaded.obj)
    return [
        InitParameter(name=a.name, default=a.default, optional=a.name in none_defaults, description=a.description)
        for a in arguments
    ]


def _none_defaults(function) -> set[str]:
    """The arguments of ``function`` whose default is None (told apart from those without a default)."""
    return {name for name, parameter in inspect.signature(function).parameters.items() if parameter.default is None}


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


def _test_spec(traced: TracedReference, hints: dict[str, Any], tier: int, lanes: int = 1) -> TestSpec:
    spec = TestSpec(input_domain="positive" if _needs_positive_inputs(traced) else "real")
    if tier == 3:
        # Per input instead (TensorSpec.domain): a loss's logits may be negative while its target is logged.
        spec.input_domain = "real"
        spec.cpu_shapes = [list(shape) for shape in LOSS_CPU_SHAPES]
        spec.gpu_shapes = [list(shape) for shape in LOSS_GPU_SHAPES]
        if traced.rank >= 3:
            # Written for [B, T, V] logits (a gather or softmax along dim 2): the rows span the leading dims.
            lead = [1] * (traced.rank - 3)
            # Sequences of one token (T = 1) count none where the labels are shifted (analyze/shifts.py): the last
            # token of each sequence reads the pad value.
            tokens = 2 if traced.shifts else 1
            spec.cpu_shapes = [lead + shape for shape in ([1, 3, 127], [2, 3, 509], [2, tokens, 20000])]
            spec.gpu_shapes = [lead + shape for shape in ([4, 1024, 32000], [1, 333, 128256])]
    if tier in (1, 2) and traced.rank == 2:
        # Written for [rows, columns] (a reduction along dim=1): the reference computes something else on 3-d inputs.
        spec.cpu_shapes = [[6, 31], [5, 64], [3, 127]]
        spec.gpu_shapes = [[1024, 4096], [256, 14336], [1332, 1023]]
    fewest = _fewest_columns(traced)
    if tier == 2:
        # Rows of one column, where a statistic sees a single value (of as few as an unbiased variance is defined
        # for); bf16 outputs are normalised values near 1, where one bf16 ulp is already 0.8%.
        spec.cpu_shapes.append([4, fewest])
        spec.gpu_shapes.append([8, fewest])
        spec.tolerances["bfloat16"] = [2e-2, 2e-2]
    rank = max(map(pattern_rank, traced.broadcast_inputs.values()), default=0)
    if tier in (1, 2) and traced.written_rank >= 3:
        # Written for inputs of that many dims (GPT-J's ``x[:, :, :, ::2]``): every test shape has them.
        rank = max(rank, traced.written_rank)
    if rank:
        patterns = list(traced.broadcast_inputs.values())
        spec.cpu_shapes, spec.gpu_shapes = _broadcast_test_shapes(rank, tier, patterns, fewest)
    if lanes > 1:  # rows of whole lanes, odd lane lengths kept odd (masked tiles)
        for shapes in (spec.cpu_shapes, spec.gpu_shapes):
            for shape in shapes:
                shape[-1] = lanes * max(1, shape[-1] // lanes)
    return _apply_hints(spec, hints.get("test", {}), "test", traced.loaded.origin)


def _broadcast_test_shapes(
    rank: int, tier: int, patterns: list[str] = (), fewest: int = 1
) -> tuple[list[list[int]], list[list[int]]]:
    """Test shapes of at least ``rank`` dims (a broadcast input's pattern needs them), every leading dim above 1 in
    the first shapes so that each broadcast one repeats; a row kernel's rows of ``fewest`` columns last."""
    lead = max(rank, 3) - 1
    cpu = [[2] * (lead - 1) + [3, 31], [3] * (lead - 1) + [5, 64], [1] * (lead - 1) + [2, 67]]
    gpu = [[4] * (lead - 1) + [512, 4096], [2] * (lead - 1) + [256, 14336], [3] * (lead - 1) + [333, 1023]]
    beside_row = [pattern_tokens(pattern)[-2] for pattern in patterns if len(pattern_tokens(pattern)) >= 2]
    if rank >= 4 and any(token in (INSERTED, BROADCAST) for token in beside_row):
        # A dim next to the row that an input broadcasts over (RoPE's heads in [batch, seq, heads, dim]) is summed
        # for that input's gradient: kept as few as a model's heads, the long dim one further out.
        for shape in gpu:
            shape[-3], shape[-2] = shape[-2], shape[-3]
    if tier == 2:
        cpu.append([2] * lead + [fewest])
        gpu.append([2] * (lead - 1) + [4, fewest])
    return cpu, gpu


def _fewest_columns(traced: TracedReference) -> int:
    """The fewest columns a row needs for the reference's statistics to exist: one, or one more than the largest
    correction of a variance or standard deviation (the Annotated Transformer's ``x.std(-1)`` divides by n - 1: a
    row of one column is NaN in the reference and the kernel alike, a test that compares nothing)."""
    corrections = [
        variance_correction(call)
        for call in traced.calls.values()
        if call.name in ("var", "std", "var_mean", "std_mean")
    ]
    return max(corrections, default=0) + 1


def _needs_positive_inputs(traced: TracedReference) -> bool:
    """True when log/sqrt/rsqrt/a fractional power reads an input-dependent value that may be negative."""
    for call in traced.calls.values():
        domain_limited = call.name in _DOMAIN_OPS or (
            call.name == "pow" and len(call.operands) == 2 and is_fractional_exponent(call.operands[1])
        )
        if domain_limited and not _nonnegative(traced, call.operands[0]):
            return True
        # F.kl_div(reduction="none") logs its target unless the target is a log already
        if call.name == "kl_div_pointwise" and not call.options.get("log_target"):
            if not _nonnegative(traced, call.operands[1]):
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
    if call.name == "statistic":  # var_mean()[0] is a variance or std; [1] a mean of the reduced values
        source = traced.calls.get(operands[0])
        return call.options["index"] == 0 or (source is not None and _nonnegative(traced, source.operands[0]))
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
