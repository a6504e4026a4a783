"""Tier classification of a traced reference, with a one-sentence reason that names the deciding op and line.

1 (element-wise): only element-wise ops. 2 (row reduction): reductions along the last dimension (the inputs'
row) only, chained as deep as the math goes (mean then variance, max then sum of exponentials), every output either
row-shaped or one value per row (rstd, logsumexp). 3 (fused / complex): losses over a class dimension, gathers and
indexing by tensor, matrix products, element reordering, reductions over other dims, over everything or over what is
no longer the row (``x.sum(-1).sum(-1)``), or outputs of other shapes.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from tools.kernelgen.analyze.ops import ELEMENTWISE
from tools.kernelgen.analyze.ops import META
from tools.kernelgen.analyze.ops import REDUCTION
from tools.kernelgen.analyze.ops import STRUCTURAL
from tools.kernelgen.analyze.ops import OpCall
from tools.kernelgen.analyze.ops import reduced_dims
from tools.kernelgen.analyze.trace import TracedReference

CLASS_LOSSES = ("cross_entropy", "nll_loss")
INDEXING = ("gather", "index_select", "index", "embedding")
PRODUCTS = ("matmul", "linear", "einsum")


@dataclass
class Classification:
    tier: int
    reason: str
    call: OpCall | None = None  # the op that decided a tier 3 (a refusal names it and its line)


def _at(call: OpCall) -> str:
    return f"`{call.label}`" + (f" (line {call.line})" if call.line is not None else "")


# Ops that reorder dims: one feeding a class loss has moved its classes off the last dim.
MOVES_DIMS = ("transpose", "permute", "movedim", "swapaxes", "swapdims")


def structural_reason(call: OpCall) -> str:
    if call.name in CLASS_LOSSES:
        return (
            f"{_at(call)} is a loss over the class dimension: each row is read in several passes and the target "
            "picks a class of it (class indices) or weighs each class (probabilities)"
        )
    if call.name in INDEXING:
        return f"{_at(call)} gathers elements by a tensor of indices, so outputs do not line up with inputs"
    if call.name in PRODUCTS:
        return f"{_at(call)} is a matrix product: every output element mixes a whole row with a column"
    if call.name.endswith("_loss") or call.name in (
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
    ):
        return f"{_at(call)} is a loss that reduces the whole tensor"
    if call.name == "slice" and indexes_an_argument(call):
        return (
            f"{_at(call)} picks elements of the tensor argument `{call.operands[0].name}` by constant indices (scalar "
            "indexing of a parameter vector), which kernelgen reads from a module's parameters only: hold it as an "
            f"nn.Parameter and index it there (self.{call.operands[0].name}[0])"
        )
    if call.name == "slice" and _slices_leading_dims(call):
        return (
            f"{_at(call)} slices the rows (the sequence, as a causal LM's shift logits[..., :-1, :] does), which "
            "kernelgen's kernels read aligned: slice before the kernel and pass it the sliced tensors, or shift the "
            "labels alone, which kernelgen takes (labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:], the "
            "logits whole: the last token of each sequence is then ignored)"
        )
    if call.name in MOVES_DIMS and class_loss_fed(call):
        return (
            f"{_at(call)} ({call.name}) moves the classes to dim 1 for `F.{class_loss_fed(call)}`"
            ", whose rows a loss kernel reads with the classes last: flatten the tokens instead "
            "(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))"
        )
    if call.name == "slice":
        return (
            f"{_at(call)} reads other positions of the row (an index map within the row: halves, interleaves, "
            "rotate_half), which element-wise and row kernels cannot express"
        )
    if call.name in ARG_REDUCTIONS:
        return (
            f"{_at(call)} ({call.name}) gives a position, not a value, of each row: kernelgen derives kernels of "
            "values (a metric such as accuracy computed beside the loss belongs outside the kernel)"
        )
    return (
        f"{_at(call)} ({call.name}) moves elements between positions, which element-wise and row kernels cannot express"
    )


# Reductions to the index of a row's extreme: their output is a position, whatever the row's values.
ARG_REDUCTIONS = ("argmax", "argmin")


def class_loss_fed(call: OpCall) -> str | None:
    """``cross_entropy`` / ``nll_loss`` when the value is their scores (their classes moved to dim 1), else None."""
    for user in getattr(call.node, "users", None) or {}:
        name = getattr(user.target, "__name__", None)
        if name in CLASS_LOSSES and user.args[:1] == (call.node,):
            return name
    return None


def _slices_leading_dims(call: OpCall) -> bool:
    """``x[..., :-1, :]``: a partial slice of a dim before the last, the last taken whole."""
    index = call.options.get("index")
    if not isinstance(index, tuple) or len(index) < 2 or index[-1] != slice(None):
        return False
    return any(isinstance(part, slice) and part != slice(None) for part in index[:-1])


def indexes_an_argument(call: OpCall) -> bool:
    """``weight[0]`` of a function's tensor argument: constant integer indices (a module's ``self.weight[0]`` is a
    parameter element instead, ``ops.py``)."""
    source = call.operands[0] if call.operands else None
    index = call.options.get("index")
    constant = type(index) is int or (isinstance(index, tuple) and index and all(type(i) is int for i in index))
    return bool(constant) and getattr(source, "op", None) == "placeholder"


def _structural_rank(call: OpCall) -> int:
    for rank, family in enumerate((CLASS_LOSSES, INDEXING, PRODUCTS)):
        if call.name in family:
            return rank
    return 3


def _input_rank(traced: TracedReference, call: OpCall) -> int | None:
    shape = traced.shape(call.operands[0]) if call.operands else None
    if shape is not None:
        return len(shape)
    return traced.rank if not traced.shapes_known else None


def _reduces_rows(traced: TracedReference, call: OpCall) -> bool:
    """Whether the operand's last dim is still the row (the inputs' hidden dim), not what an earlier reduction,
    a flatten or an unsqueeze left there; True when shapes are unknown."""
    shape = traced.shape(call.operands[0]) if call.operands else None
    if shape is None:
        return True
    # The leading dims flattened (``x.reshape(B * T, H)``) keep every row whole: still one statistic per row.
    return shape[-1] == traced.hidden and (len(shape) >= traced.rank or math.prod(shape[:-1]) == traced.row_count)


def _regrouping_view(traced: TracedReference, call: OpCall) -> OpCall | None:
    """The reshape (``x.view(b, groups, -1)``) whose last dim the reduction ``call`` folds, when one made it other
    than the row: the nearest view or reshape up the operand's chain of layout and element-wise ops."""
    node = call.operands[0] if call.operands else None
    while node is not None and node in traced.calls:
        producer = traced.calls[node]
        if producer.name in ("view", "reshape"):
            shape = traced.shape(node)
            # A view that keeps dims before its last (a flat view is no group of the row).
            return producer if shape is None or len(shape) >= 2 else None
        if producer.family == REDUCTION or not producer.operands:
            return None
        node = producer.operands[0] if hasattr(producer.operands[0], "op") else None
    return None


def _row_shaped(traced: TracedReference, shape: tuple[int, ...] | None) -> bool:
    """A whole row per row of the inputs, or one value per row (the reduced dim kept as 1 or dropped)."""
    if shape is None:
        return True
    rank = traced.rank
    if len(shape) == rank:
        return shape[-1] in (traced.hidden, 1)
    return len(shape) == rank - 1


def _reads_the_row_length(call: OpCall) -> bool:
    """``x.size(-1)`` or ``x.shape[-1]``: a size read as a number (``x.shape`` alone is read by indexing it)."""
    if call.family != META:
        return False
    if call.name == "size":
        return len(call.node.args) > 1 or "dim" in call.node.kwargs
    return call.name == "getitem"


def _first_widening(traced: TracedReference) -> OpCall | None:
    """The first element-wise op whose result has a shape none of its operands has and that is no row of the
    inputs: where differently shaped inputs broadcast into more than the first input (``x * s.unsqueeze(1)`` of a
    scale the trace drew like ``x``)."""
    for call in traced.calls.values():
        if call.family != ELEMENTWISE:
            continue
        shape = traced.shape(call.node)
        operands = [traced.shape(o) for o in call.operands if hasattr(o, "op")]
        if shape is None or len(operands) < 2 or None in operands:
            continue
        if shape not in operands and not _row_shaped(traced, shape):
            return call
    return None


def classify(traced: TracedReference) -> Classification:
    calls = list(traced.calls.values())
    structural = [call for call in calls if call.family == STRUCTURAL]
    if structural:
        # The most telling op decides: a loss or a gather says more than the transpose that feeds it.
        call = min(structural, key=_structural_rank)
        return Classification(3, structural_reason(call) + ".", call)
    reductions = [call for call in calls if call.family == REDUCTION]
    off_row = None  # the first reduction whose operand's last dim is no longer the row
    for call in reductions:
        rank = _input_rank(traced, call)
        dims = reduced_dims(call, rank)
        if dims is None or rank is None:
            continue
        if len(dims) == rank and rank > 1:
            return Classification(3, f"{_at(call)} reduces the whole tensor to a scalar, a loss-style reduction.", call)
        if dims != (rank - 1,):
            named = ", ".join(str(d) for d in dims)
            return Classification(3, f"{_at(call)} reduces over dim {named}, not only the last dimension.", call)
        if off_row is None and not _reduces_rows(traced, call):
            off_row = call
    if off_row is not None:
        regrouped = _regrouping_view(traced, off_row)
        if regrouped is not None:
            reason = (
                f"{_at(off_row)} reduces the last dimension of {_at(regrouped)}, which regroups the row (statistics "
                "over a group of it, as a GroupNorm takes them), not each row."
            )
        else:
            reason = (
                f"{_at(off_row)} reduces a last dimension that is not the inputs' row (its operand was already "
                "reduced, flattened or unsqueezed), not each row."
            )
        return Classification(3, reason, off_row)
    odd = [shape for shape in (traced.shape(node) for node in traced.outputs) if not _row_shaped(traced, shape)]
    if odd:
        widening = _first_widening(traced)
        if widening is not None:
            shapes = " and ".join(str(list(traced.shape(o))) for o in widening.operands if traced.shape(o) is not None)
            reason = (
                f"{_at(widening)} broadcasts operands of shapes {shapes} (example inputs) into "
                f"{list(traced.shape(widening.node))}, more than a row per row of the first input: an input it "
                'broadcasts needs its shape declared (KERNELGEN = {"shapes": {"x": "batch seq hidden", '
                '"scale": "batch 1 hidden"}}, docs/tiers.md).'
            )
            return Classification(3, reason, widening)
        return Classification(3, f"it returns an output of shape {list(odd[0])}, neither a row nor one value per row.")
    if reductions:
        labels = list(dict.fromkeys(f"`{call.label}`" for call in reductions))
        lines = sorted({call.line for call in reductions if call.line is not None})
        where = f" (line {', '.join(map(str, lines))})" if lines else ""
        verb = "reduces" if len(labels) == 1 else "reduce"
        reason = f"{', '.join(labels)}{where} {verb} each row along the last dimension; outputs depend on whole rows."
        return Classification(2, reason)
    sizes = [call for call in calls if _reads_the_row_length(call)]
    if sizes:
        reason = f"{_at(sizes[0])} reads the row length (n_cols): a row kernel, whose programs each hold whole rows."
        return Classification(2, reason)
    names = ", ".join(dict.fromkeys(call.name for call in calls if call.family == "elementwise")) or "none"
    inputs = ", ".join(traced.tensor_inputs)
    return Classification(
        1, f"only element-wise ops ({names}): each output element depends only on {inputs} at the same position."
    )
