"""Refusals of references that are neither element-wise, row reductions nor losses, in the reference's own terms.

A reference classified tier 3 is lowered as a loss; one that returns a value per element (a rotary embedding, an
interleaved GLU, a GroupNorm, PolyNorm's indexed weights) is no loss, and the loss lowering's complaint ("a loss
returns one value per row") would name the wrong category. Such a reference is refused here with the construct that
made it tier 3 (the classification's deciding op), its line and that line's text.
"""

from __future__ import annotations

from tools.kernelgen.analyze.classify import Classification
from tools.kernelgen.analyze.classify import indexes_an_argument
from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.losses import PerElementOutputError
from tools.kernelgen.analyze.losses import lower_loss
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.trace import TracedReference


def _returns_values_per_element(traced: TracedReference, by_shape: bool = True) -> bool:
    """Whether every output has a value per element of a row (the inputs' rank, a last dim longer than 1); where
    the shapes are unknown (the example inputs do not fit a regrouping view), or not ``by_shape`` (an output's shape
    alone made it tier 3: ``x.view(-1)``), as the loss lowering judges it."""
    shapes = [traced.shape(node) for node in traced.outputs]
    if by_shape and shapes and all(shape is not None for shape in shapes):
        return all(len(shape) >= traced.rank and shape[-1] > 1 for shape in shapes)
    try:
        lower_loss(traced)
    except PerElementOutputError:
        return True
    except AnalyzeError:
        return False
    return False


def _line_text(traced: TracedReference, line: int | None) -> str:
    lines = traced.loaded.source.splitlines()
    if line is None or not 1 <= line <= len(lines):
        return ""
    return " ".join(lines[line - 1].split())


def refuse_unless_loss(traced: TracedReference, classification: Classification) -> None:
    """Raise, in one line naming the deciding construct (or output) and its line, for a tier-3 reference none of
    whose outputs reduces its rows (so not a loss), or one that indexes a tensor argument by constants."""
    if classification.tier != 3:
        return
    call = classification.call
    if call is not None and indexes_an_argument(call):  # refused as such whatever the reference returns
        why = ""
    elif traced.outputs and _returns_values_per_element(traced, by_shape=call is not None):
        why = (
            "; kernelgen synthesizes element-wise ops, reductions along the last dimension and losses over rows, and "
            "this reference returns a value per element, so it is none of them"
        )
    else:
        return
    line = call.line if call is not None else next(filter(None, map(node_line, traced.outputs)), None)
    text = _line_text(traced, line)
    where = f"`{text}`: " if text else ""
    reason = classification.reason.rstrip(".")
    raise AnalyzeError(
        f"{where}{reason}{why}; rewrite it with supported ops {HAND_WRITTEN_PROFILE_HINT}",
        origin=traced.loaded.origin,
        line=line,
    )


__all__ = ["refuse_unless_loss"]
