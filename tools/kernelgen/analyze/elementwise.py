"""Tier 1: turn the traced graph into sympy expressions with ``apply_op`` and synthesize the Triton math."""

from __future__ import annotations

from typing import Any

import sympy
import torch.fx as fx

from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import ELEMENTWISE
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import OpCall
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.synth import SUPPORTED_OPS
from tools.kernelgen.synth import ElementwiseMath
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth import make_symbols
from tools.kernelgen.synth import synthesize_elementwise


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


def synthesize(traced: TracedReference) -> ElementwiseMath:
    outputs = build_expressions(traced)
    parameters = {p.name: p.shape for p in traced.parameters}
    try:
        return synthesize_elementwise(outputs, list(traced.tensor_inputs), parameters, traced.runtime_hyperparameters)
    except ValueError as error:
        raise AnalyzeError(
            f"synthesizing the element-wise math failed: {error}; rewrite the reference {HAND_WRITTEN_PROFILE_HINT}",
            origin=traced.loaded.origin,
        ) from None


def activation_calls(traced: TracedReference) -> list[OpCall]:
    """Non-arithmetic element-wise ops that read an input: the activations a backward recomputes."""
    arithmetic = {"add", "sub", "mul", "div", "neg", "pow", "square", "reciprocal", "abs", "where"}
    arithmetic |= {"gt", "ge", "lt", "le", "eq", "ne", "maximum", "minimum"}
    return [
        call
        for call in traced.calls.values()
        if call.family == ELEMENTWISE and call.name not in arithmetic and _reads_tensor(traced, call.node)
    ]


def _reads_tensor(traced: TracedReference, node: fx.Node) -> bool:
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "get_attr":
            return True
        if current.op == "placeholder" and traced.placeholder_names.get(current) in traced.tensor_inputs:
            return True
        stack.extend(current.all_input_nodes)
    return False
