"""The math section of a profile, written from the lowered reference: statistics and output formulas.

Outputs of an element-wise reference are written in its own ops (``gelu(a, approximate='tanh') * b``) when that
reads back to exactly the traced expression; everything else is written in sympy's spelling of the canonical ops.
Every formula is read back with ``parse_formula`` before it goes into the profile: a profile says what the reference
computes, or analysis stops.
"""

from __future__ import annotations

import sympy

from sympy.logic.boolalg import ITE

from tools.kernelgen.analyze.describe import Describer
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.lanes import LaneProgram
from tools.kernelgen.analyze.losses import LoweredLoss
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.program import LoweredProgram
from tools.kernelgen.analyze.program import lower
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.profile import BATCH_SHARE
from tools.kernelgen.profile import COLUMN_INDEX
from tools.kernelgen.profile import Lanes
from tools.kernelgen.profile import LossScale
from tools.kernelgen.profile import LossSpec
from tools.kernelgen.profile import Math
from tools.kernelgen.profile import Statistic
from tools.kernelgen.synth import format_formula
from tools.kernelgen.synth import parse_formula
from tools.kernelgen.synth.functions import indicator
from tools.kernelgen.synth.rows import N_COLS
from tools.kernelgen.synth.rules import is_condition


def profile_math(traced: TracedReference) -> tuple[Math, LoweredProgram]:
    """The profile's ``math`` (formulas) and the lowered program it was written from."""
    program = lower(traced)
    names = [*traced.tensor_inputs, *(p.name for p in traced.parameters), *traced.runtime_hyperparameters]
    statistics = []
    for name, reduce, operand in program.statistics:
        statistics.append(
            Statistic(name=name, reduce=reduce, of=_written(operand, [*names, COLUMN_INDEX, N_COLS], traced))
        )
        names.append(name)
    describer = Describer(traced, formula=True)
    outputs = {}
    for (name, expr), node in zip(program.outputs.items(), traced.outputs):
        dtype = traced.dtype(node)
        if is_condition(expr) and dtype is not None and dtype.is_floating_point:
            expr = indicator(expr)  # (x > 0).float(): the 0/1 numbers of the mask, with no gradient
        elif is_condition(expr):
            raise AnalyzeError(
                f"output '{name}' is a condition ({format_formula(expr)}), not a number: a kernel's outputs are "
                "numbers; compare outside the kernel (return what the condition is taken of)",
                origin=traced.loaded.origin,
                line=node_line(node),
            )
        own_ops = describer.text(node) if not program.statistics else None
        outputs[name] = _written(expr, [*names, COLUMN_INDEX, N_COLS], traced, own_ops)
    return Math(statistics=statistics, outputs=outputs), program


def lane_math(traced: TracedReference, lanes: LaneProgram) -> tuple[Math, LoweredProgram]:
    """The profile's ``math`` of a reference that moves elements within the row: a formula per output lane over the
    input lanes, and where each lane lies (``math.lanes``)."""
    names = [*lanes.input_lanes, *traced.runtime_hyperparameters]
    outputs = {name: _written(expr, [*names, N_COLS], traced) for name, expr in lanes.outputs.items()}
    written = Lanes(
        count=lanes.lanes,
        inputs={name: lane.written() for name, lane in lanes.input_lanes.items()},
        outputs={name: lane.written() for name, lane in lanes.output_lanes.items()},
        groups=[dict(group) for group in lanes.groups],
    )
    program = LoweredProgram(outputs=dict(lanes.outputs), keepdim={name: True for name in traced.output_names})
    return Math(outputs=outputs, lanes=written), program


def loss_profile_math(traced: TracedReference, lowered: LoweredLoss) -> Math:
    """The profile's ``math`` of a loss: statistics, per-row outputs and the reduction over rows."""
    names = [*traced.tensor_inputs, *lowered.int_hyperparameters, *traced.runtime_hyperparameters]
    names += [COLUMN_INDEX, N_COLS]
    statistics = []
    for name, reduce, operand in lowered.statistics:
        statistics.append(Statistic(name=name, reduce=reduce, of=_written(operand, names, traced)))
        names.append(name)
    scale_names = [scale.name for scale in lowered.scales]
    outputs = {name: _written(expr, [*names, *scale_names], traced) for name, expr in lowered.outputs.items()}
    denominator = _written(lowered.denominator, [*names, BATCH_SHARE], traced)
    scales = [
        LossScale(scale.name, _written(scale.divisor, [*names, BATCH_SHARE], traced), scale.floor)
        for scale in lowered.scales
    ]
    loss = LossSpec(
        reduction=lowered.reduction,
        denominator=denominator,
        denominator_min=lowered.denominator_floor,
        scales=scales,
        flat_rows=traced.flat_rows,
    )
    return Math(statistics=statistics, outputs=outputs, loss=loss)


def _reads_back(text: str, names: list[str], expr: sympy.Expr) -> bool:
    try:
        parsed = parse_formula(text, names)
    except (ValueError, TypeError):
        return False
    if is_condition(parsed) or is_condition(expr):  # a comparison reads back as itself, not as its 0/1 value
        return parsed == expr
    return parsed == expr or sympy.simplify(parsed - expr) == 0


def written_formula(expr: sympy.Expr, names: list[str], traced: TracedReference) -> str:
    """``expr`` as a profile formula over ``names`` (checked to read back)."""
    return _written(sympy.sympify(expr), names, traced)


def _written(expr: sympy.Expr, names: list[str], traced: TracedReference, own_ops: str | None = None) -> str:
    if own_ops is not None and _reads_back(own_ops, names, expr):
        return own_ops
    # A condition chosen by a condition (``where(labels < 0, True, labels != -100)``, from a clamp of the labels
    # beside a mask) as the and/or it is: the formula reads back as that, not as sympy's ITE.
    expr = expr.replace(lambda node: isinstance(node, ITE), lambda node: node.to_nnf())
    text = format_formula(expr)
    if not _reads_back(text, names, expr):
        raise AnalyzeError(f"internal: the formula {text!r} does not read back as {expr}", origin=traced.loaded.origin)
    return text
