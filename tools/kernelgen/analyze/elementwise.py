"""Tier 1: the traced graph as sympy expressions (``apply_op``) and as formulas for the profile."""

from __future__ import annotations

from typing import Any

import sympy
import torch.fx as fx

from tools.kernelgen.analyze.describe import Describer
from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import ELEMENTWISE
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.synth import SUPPORTED_OPS
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth import format_formula
from tools.kernelgen.synth import make_symbols
from tools.kernelgen.synth import parse_formula


class _ExpressionBuilder:
    def __init__(self, traced: TracedReference):
        self.traced = traced
        names = traced.tensor_inputs + [p.name for p in traced.parameters] + traced.runtime_hyperparameters
        self.symbols = make_symbols(names)
        self.cache: dict[fx.Node, Any] = {}

    def value(self, value: Any) -> Any:
        if isinstance(value, fx.Node):
            if value not in self.cache:
                self.cache[value] = self._node(value)
            return self.cache[value]
        if isinstance(value, (tuple, list)):
            return type(value)(self.value(item) for item in value)
        return value

    def _node(self, node: fx.Node) -> Any:
        if node.op == "placeholder":
            return self.symbols[self.traced.placeholder_names[node]]
        if node.op == "get_attr":
            name = self.traced.parameter_names.get(node.target)
            if name is None or name not in self.symbols:
                raise self._error(f"`self.{node.target}` is not a per-channel or scalar parameter", node)
            return self.symbols[name]
        call = self.traced.calls[node]
        if call.family in (CAST, LAYOUT):
            return self.value(call.operands[0])
        if call.family != ELEMENTWISE or call.name not in SUPPORTED_OPS:
            raise self._error(f"`{call.label}` ({call.name}) is not element-wise-synthesizable", node)
        operands = [self.value(operand) for operand in call.operands]
        options = {key: self.value(option) for key, option in call.options.items()}
        try:
            return apply_op(call.name, *operands, **options)
        except (ValueError, TypeError) as error:
            raise self._error(f"`{call.label}`: {error}", node) from None

    def _error(self, message: str, node: fx.Node) -> AnalyzeError:
        return AnalyzeError(
            f"{message}; rewrite it with supported ops {HAND_WRITTEN_PROFILE_HINT}",
            origin=self.traced.loaded.origin,
            line=node_line(node),
        )


def build_expressions(traced: TracedReference) -> dict[str, sympy.Expr]:
    builder = _ExpressionBuilder(traced)
    return {name: builder.value(node) for name, node in zip(traced.output_names, traced.outputs)}


def output_formulas(traced: TracedReference) -> dict[str, str]:
    """Each output's formula for the profile, in the reference's own ops (``gelu(a, approximate='tanh') * b``)
    when that reads back to exactly the traced expression, else in the expanded sympy form."""
    expressions = build_expressions(traced)
    names = traced.tensor_inputs + [p.name for p in traced.parameters] + traced.runtime_hyperparameters
    describer = Describer(traced, formula=True)
    formulas = {}
    for name, node in zip(traced.output_names, traced.outputs):
        text = describer.text(node)
        try:
            same = parse_formula(text, names) == expressions[name]
        except (ValueError, TypeError):
            same = False
        formulas[name] = text if same else format_formula(expressions[name])
    return formulas
