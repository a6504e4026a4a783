"""Views of the fused linear + loss kernel (``fused_linear.enabled``): the loss of ``hidden @ weight.T + bias``
computed over chunks of rows by the loss kernel of the same profile.

Each ``[rows, classes]`` input of the loss becomes a hidden-state matrix, a weight and an optional bias
(``hidden``, ``weight``, ``bias`` for a loss of one such input; ``NAME_hidden``, ... for several, as a distillation
loss of student and teacher logits has); class indices and hyper-parameters pass through, and so do per-class
inputs (class weights) after the biases, renamed ``class_NAME`` where the linear layer's names take theirs
(``class_weight``, as upstream's ``ce_weight``). The fused kernel's files
reuse the module and functional templates with these names.
"""

from __future__ import annotations

import dataclasses
import textwrap

from dataclasses import dataclass

from tools.kernelgen.profile import KernelProfile
from tools.kernelgen.profile import benchmark_grad_inputs
from tools.kernelgen.profile import shifted_targets
from tools.kernelgen.profile import written_for_sequences
from tools.kernelgen.render.hygiene import renamed_text
from tools.kernelgen.render.reference_hypers import module_call_keywords
from tools.kernelgen.render.test_shapes import ShapeParams
from tools.kernelgen.render.test_shapes import fused_linear_shape_params
from tools.kernelgen.render.text import Defaulted
from tools.kernelgen.render.text import signature
from tools.kernelgen.render.text import wrap_docstring
from tools.kernelgen.render.views import KernelViews
from tools.kernelgen.render.views import build_views
from tools.kernelgen.render.views import docstring_formula
from tools.kernelgen.render.views import kernel_view
from tools.kernelgen.render.views import loss_reductions
from tools.kernelgen.render.views import loss_scales
from tools.kernelgen.render.views import module_view
from tools.kernelgen.synth.printer import TAKE_HELPER

# (B, T, hidden, classes) the generated test runs: B * T rows that leave a short last chunk of rows, a class count
# that masks a block. The loss kernel's own test covers vocabularies of several chunks; here the interpreter runs a
# program per class row of the weight's gradient, so the CPU vocabulary stays small (one shape: a second with the
# same properties only doubled the interpreter's work).
CPU_SHAPES = [(2, 5, 16, 300)]
GPU_SHAPES = [(2, 1024, 4096, 32000), (1, 1024, 4096, 128256)]


@dataclass(frozen=True)
class FusedTensorView:
    name: str  # the loss input whose logits the product gives
    hidden: str
    weight: str
    bias: str
    grad: bool
    benchmark_grad: bool  # differentiated by the benchmark (profile.benchmark_grad_inputs)


@dataclass(frozen=True)
class FusedMeanView:
    value: str  # the reduction hyper-parameter's value (or the fixed reduction)
    code: str  # the mean's denominator over every row, as wrapper code


@dataclass(frozen=True)
class ChunkFloor:
    """Rows a fused kernel's chunk takes at least, beyond upstream's rule (``_chunk_rows``): an expression of
    ``hidden_size``, and why its peak stays within upstream's (the comment above it, ``comment_lines``)."""

    rows: str
    why: str

    @property
    def comment_lines(self) -> list[str]:
        return textwrap.wrap(self.why, width=114)  # "    # " before each, 120 columns


def chunk_floor(n_logits: int, whole_groups: bool) -> ChunkFloor | None:
    """A distillation's logits tensors together, or a two-stage loss's chunk of whole groups of sequences, may hold
    d(weight)'s size of logits; a single loss over rows keeps upstream's rule (None)."""
    fewer_chunks = "and fewer chunks read and write d(weight) fewer times in longer products."
    if n_logits > 1:
        return ChunkFloor(
            f"hidden_size // {n_logits} // 128 * 128",
            f"A distillation loss's {n_logits} logits tensors may take d(weight)'s size per chunk (hidden / {n_logits} "
            f"rows): its step holds {n_logits} weights already, {fewer_chunks}",
        )
    if whole_groups:
        return ChunkFloor(
            "hidden_size",
            "A chunk of whole groups of sequences may hold d(weight)'s size of logits (hidden rows): upstream's "
            f"chunked losses keep each chunk's own d(weight) beside the sum, so the peak stays under theirs, {fewer_chunks}",
        )
    return None


@dataclass(frozen=True)
class FusedLinearOpsView:
    loss: str  # the loss kernel (liger_kernel.ops.<loss>)
    tensors: list[FusedTensorView]
    row_inputs: list[str]
    row_kinds: dict[str, str]  # each row input's draw in tests: class indices, mask, positive, log_probabilities, real
    # A reference written for [B, T, V] logits is called on one sequence of the rows: the statement that makes the
    # logits and row inputs so, else empty
    sequence_unsqueeze: str
    class_inputs: list[str]  # per-class inputs (class weights) under their names here, after the biases
    outputs: list[str]
    output_dtype: str  # "torch.float32" where the reference upcasts the logits, else "" (the hidden states' dtype)
    chunk_outputs: list[str]
    chunk_grads: list[str]
    chunk_temporaries: list[str]  # every per-chunk tensor, deleted at the end of the chunk
    loss_call: list[str]  # the loss forward's positional arguments for one chunk
    overwrite_inputs: bool  # the loss takes overwrite_inputs: its gradients may take the chunk's logits' buffers
    reference_call: list[str]  # the reference loss's tensor arguments
    reference_attributes: list[tuple[str, str]]  # (attribute, tensor): what a module reference holds itself
    signature_tensors: list[str]  # hidden states, weights, class indices (the biases follow with defaults)
    chooser: str | None
    reduction_values: list[str]  # what the chooser may be (no per-row reduction)
    means: list[FusedMeanView]
    scales: list[FusedMeanView]  # the counts of the means a loss adds (``value``: the name of 1 / each)
    # A mean's denominator counts the batch (batch_share: F.kl_div's batchmean, x.shape[0]): size(0) of the logits
    # the reference sees, taken from the hidden states before they are flattened to rows
    batch_share: bool
    grad_names: list[str]
    all_grad_names: list[str]
    apply_returns: list[str]
    takes_grad: list[bool]
    # (position, name) of each float input the loss derives no gradient for (a teacher's hidden state and weight, a
    # per-token weight): the Function refuses it requiring grad, as the loss's own does, rather than leave it None
    gradient_free: list[tuple[int, str]]
    logits_positions: list[tuple[int, int, int]]  # tests: each logits' hidden, weight and bias in the inputs
    hyper_cases: list[dict]
    hyper_values: list[str]
    ignored: dict[str, str]
    tol: dict[str, list[float]]
    shapes: ShapeParams
    module_call: str | None  # tests: the module built with the class inputs of ``inputs``, called with the others
    takes_host_helper: bool  # a mean's denominator reads class weights through the loss's _take
    chunk_floor: ChunkFloor | None  # the chunk's least rows beyond upstream's rule
    # (class-index input, pad value) of each target the reference shifts one token left: the Function shifts it
    shifted: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def row_draw(self, name: str, count: str) -> str:
        """Test and benchmark code drawing row input ``name`` for ``count`` rows (``device``, ``dtype`` and
        ``n_classes`` in scope), as its kind asks (a mask true for about 70% of the rows)."""
        kind = self.row_kinds[name]
        if kind == "class indices":
            return f"torch.randint(0, n_classes, ({count},), device=device)"
        if kind == "mask":
            return f"torch.rand({count}, device=device) < 0.7"
        if kind == "positive":
            return f"(torch.rand({count}, device=device) + 0.1).to(dtype)"
        if kind == "log_probabilities":
            # near a picked log-probability (about -log(classes) - 0.5): a ratio of the two falls below and above 1
            return f"(torch.randn({count}, device=device) * 0.5 - 0.5 - torch.tensor(float(n_classes)).log()).to(dtype)"
        return f"torch.randn({count}, device=device).to(dtype)"


def fused_kernel_view(profile: KernelProfile, **fields):
    """The loss's kernel view as its fused linear kernel's: the fused names, no parameters of the loss's own (the
    lm_head weight and bias are inputs), and ``fields`` (inputs, signature, docstrings) of the fused kernel."""
    function_class, module_class, functional = profile.fused_linear_classes
    return dataclasses.replace(
        kernel_view(profile),
        name=profile.fused_linear_name,
        function_class=function_class,
        module_class=module_class,
        functional=functional,
        params=[],
        channel_params=[],
        param_names=[],
        **fields,
    )


def fused_linear_views(profile: KernelProfile) -> KernelViews:
    """The views of ``profile.fused_linear_name`` (``profile`` is the loss, validated, with ``fused_linear.enabled``)."""
    loss = build_views(profile)
    tensors = _tensors(profile)
    renames = _input_names(profile, tensors)
    row_inputs = [renames.get(t.name, t.name) for t in profile.inputs if t.dtype == "int64" or t.per_row]
    class_inputs = [renames[t.name] for t in profile.inputs if t.per_class]
    class_indices = {renames.get(t.name, t.name) for t in profile.inputs if t.dtype == "int64"}
    hypers = profile.hyperparameters
    function_class, module_class, functional = profile.fused_linear_classes
    signature_tensors = [name for t in tensors for name in (t.hidden, t.weight)] + row_inputs
    optional = [Defaulted(t.bias, None) for t in tensors] + [Defaulted(name, None) for name in class_inputs]
    optional += list(hypers)
    optional.append(Defaulted("chunk_size", profile.fused_linear.chunk_size))
    call_args = signature_tensors + [t.bias for t in tensors] + class_inputs + [hp.name for hp in hypers]
    call_args.append("chunk_size")
    grad_names = [
        name for t in tensors if t.grad for name in (f"grad_{t.hidden}", f"grad_{t.weight}", f"grad_{t.bias}")
    ]
    takes_grad = [t.grad for t in tensors for _ in (0, 1)] + [False] * len(row_inputs) + [t.grad for t in tensors]
    takes_grad += [False] * len(class_inputs)
    formula = renamed_text(docstring_formula(profile), renames)
    origin = profile.reference.origin or "a profile"
    kernel = fused_kernel_view(
        profile,
        inputs=signature_tensors + [t.bias for t in tensors] + class_inputs,
        grad_inputs=[name for t in tensors if t.grad for name in (t.hidden, t.weight, t.bias)],
        signature=signature(list(signature_tensors) + optional),
        call_args=call_args,
        docstring=wrap_docstring(
            f"The loss of hidden @ weight.T + bias over chunks of rows, without the whole logits: {formula}\n\n"
            f"Generated by kernelgen from {origin}; each chunk's loss and logits gradient come from "
            f"``{profile.operation_name}``."
        ),
        functional_docstring=wrap_docstring(
            f"The loss of hidden @ weight.T + bias: {formula}; see ``{function_class}``."
        ),
    )
    ops = loss.ops
    chooser = ops.chooser
    # Not flat: hidden states [B, T, H] give the reference [B, T, V] logits, whose size(0) is B, not the B * T rows
    # the chunks take (the wrapper sets batch_share from the hidden states' shape).
    means = [r for r in loss_reductions(profile, renames) if r.kind == "mean"]
    mean_views = [FusedMeanView(r.value, r.over_rows) for r in means]
    counts = loss_scales(profile, renames)
    scale_views = [FusedMeanView(r.value, r.over_rows) for r in counts]
    values = [r.value for r in ops.reductions if r.kind != "none"]
    cases = [case for case in loss.test.hyper_cases if not chooser or case[chooser] in values]
    by_name = {t.name: t for t in tensors}
    loss_call = [
        t.name if t.name in by_name else renames[t.name] if t.per_class else f"{renames.get(t.name, t.name)}[rows]"
        for t in profile.inputs
    ]
    plain_module = module_view(profile, renames)
    module = dataclasses.replace(
        plain_module,
        forward_signature=", ".join(
            signature_tensors + [f"{t.bias}=None" for t in tensors] + plain_module.forward_keywords
        ),
        apply_inputs=[f"self.{name}" if name in class_inputs else name for name in kernel.inputs],
        docstring=wrap_docstring(
            f"{profile.operation_name} of hidden @ weight.T + bias as a module, computed by ``{function_class}``."
        ),
    )
    fused = FusedLinearOpsView(
        loss=profile.operation_name,
        tensors=tensors,
        row_inputs=row_inputs,
        row_kinds=_row_kinds(profile, renames),
        sequence_unsqueeze=_one_sequence([t.name for t in tensors] + row_inputs)
        if written_for_sequences(profile)
        else "",
        class_inputs=class_inputs,
        outputs=list(ops.outputs),
        output_dtype=ops.output_dtype,
        chunk_outputs=[f"chunk_{name}" for name in ops.outputs],
        chunk_grads=[f"grad_{t.name}" for t in tensors if t.grad],
        chunk_temporaries=list(
            dict.fromkeys(
                [t.name for t in tensors]
                + [f"chunk_{name}" for name in ops.outputs]
                + [f"grad_{t.name}" for t in tensors if t.grad]
            )
        ),
        loss_call=loss_call + [hp.name for hp in hypers],
        overwrite_inputs=bool(ops.overwritable),
        reference_call=[renames.get(t.name, t.name) for t in profile.inputs if not t.attribute],
        reference_attributes=[(t.attribute, renames.get(t.name, t.name)) for t in profile.inputs if t.attribute],
        signature_tensors=signature_tensors,
        chooser=chooser,
        reduction_values=values,
        means=mean_views,
        scales=scale_views,
        batch_share=any(r.reads_batch_share for r in [*means, *counts]),
        grad_names=grad_names,
        all_grad_names=grad_names,
        apply_returns=[f"grad_{name}" if name in kernel.grad_inputs else "None" for name in kernel.inputs]
        + ["None"] * (len(hypers) + 1),
        takes_grad=takes_grad,
        gradient_free=[
            (index, name)
            for index, name in enumerate(kernel.inputs)
            if name not in kernel.grad_inputs and name not in class_indices
        ],
        logits_positions=[(2 * i, 2 * i + 1, len(signature_tensors) + i) for i in range(len(tensors))],
        hyper_cases=cases,
        hyper_values=[f"hyper[{hp.name!r}]" for hp in hypers],
        ignored=dict(ops.ignored),
        tol={**loss.test.tol, "bfloat16": [5e-2, 5e-2]},
        shapes=fused_linear_shape_params(CPU_SHAPES, GPU_SHAPES),
        module_call=_module_call(module_class, kernel.inputs, class_inputs, module_call_keywords(profile))
        if class_inputs
        else None,
        takes_host_helper=any(TAKE_HELPER + "(" in view.code for view in [*mean_views, *scale_views]),
        chunk_floor=chunk_floor(len(tensors), whole_groups=False),
        shifted=shifted_targets(profile, renames),
    )
    return KernelViews(kernel=kernel, ops=fused, module=module, test=loss.test, bench=loss.bench)


def _input_names(profile: KernelProfile, tensors: list[FusedTensorView]) -> dict[str, str]:
    """Each per-class and per-row input's name in the fused kernel: its own, or ``class_NAME`` / ``row_NAME`` where a
    linear layer's tensor or another input has that name (a per-token ``weight`` beside the lm_head's)."""
    linear = {name for t in tensors for name in (t.hidden, t.weight, t.bias)}
    taken = linear | {t.name for t in profile.inputs}
    renames = {}
    for tensor in profile.inputs:
        if tensor.per_class or tensor.per_row:
            prefix = "class_" if tensor.per_class else "row_"
            clashes = tensor.name in linear
            name = f"{prefix}{tensor.name}" if clashes else tensor.name
            while clashes and name in taken:
                name = f"{prefix}{name}"
            taken.add(name)
            renames[tensor.name] = name
    return renames


def _one_sequence(names: list[str]) -> str:
    """The statement that gives each of ``names`` a leading dim of 1: one sequence of every row."""
    return f"{', '.join(names)}{',' if len(names) == 1 else ''} = {', '.join(f'{n}.unsqueeze(0)' for n in names)}"


def _row_kinds(profile: KernelProfile, renames: dict[str, str]) -> dict[str, str]:
    """What tests and benchmarks draw for each row input: class indices, a boolean mask, or one value per row of the
    input's domain (positive: a weight a mean divides by the sum of)."""
    kinds = {}
    for t in profile.inputs:
        if t.dtype == "int64":
            kinds[t.name] = "class indices"
        elif t.per_row:
            domain = t.domain or profile.test.input_domain
            kind = "mask" if t.dtype == "bool" else domain if domain in ("positive", "log_probabilities") else "real"
            kinds[renames.get(t.name, t.name)] = kind
    return kinds


def _module_call(module_class: str, inputs: list[str], class_inputs: list[str], keywords) -> str:
    """The fused module as tests call it, from a list ``inputs`` of the Function's tensors; ``keywords``:
    ``module_call_keywords``'s constructor and forward hyper-parameters."""
    constructor_keywords, forward_keywords = keywords
    init = [f"{name}=inputs[{inputs.index(name)}]" for name in class_inputs] + constructor_keywords
    forward = [f"inputs[{index}]" for index, name in enumerate(inputs) if name not in class_inputs] + forward_keywords
    return f"{module_class}({', '.join(init)})({', '.join(forward)})"


def _tensors(profile: KernelProfile) -> list[FusedTensorView]:
    element = [t for t in profile.inputs if t.dtype != "int64" and not t.per_class and not t.per_row]
    benchmarked = benchmark_grad_inputs(profile.tier, profile.inputs)
    views = []
    for tensor in element:
        prefix = "" if len(element) == 1 else f"{tensor.name}_"
        names = (f"{prefix}hidden", f"{prefix}weight", f"{prefix}bias")
        views.append(FusedTensorView(tensor.name, *names, tensor.requires_grad, tensor.name in benchmarked))
    return views


__all__ = ["FusedLinearOpsView", "fused_linear_views"]
