"""Readable formulas of the traced graph, kept in the reference's own op structure.

``gelu_tanh(a) * b`` reads better than the expanded sympy form; these strings fill ``forward_computation``
and ``backward.recompute`` and quote ops in messages.
"""

from __future__ import annotations

import operator

from typing import Any

import torch.fx as fx

from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import META
from tools.kernelgen.analyze.ops import OpCall
from tools.kernelgen.analyze.sequence_text import reference_names
from tools.kernelgen.analyze.trace import TracedReference

_INFIX = {"add": ("+", 1), "sub": ("-", 1), "mul": ("*", 2), "div": ("/", 2), "pow": ("**", 4)}
_COMPARISONS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
_ATOM = 10
# Options that are spelled out only when they differ from these defaults.
_QUIET_OPTIONS = {
    "alpha": 1,
    "rounding_mode": None,
    "keepdim": False,
    "weight": None,
    "size_average": None,
    "reduce": None,
    "dtype": None,
}


def _number(value: Any) -> str:
    return repr(value) if not isinstance(value, float) or not value.is_integer() else f"{value:.1f}"


class Describer:
    """``formula=True`` writes canonical op calls only (``gelu(a, approximate='tanh')``), which ``parse_formula``
    reads back; otherwise the shorter names people use (``gelu_tanh(a)``)."""

    def __init__(self, traced: TracedReference, named: dict[fx.Node, str] | None = None, formula: bool = False):
        self.traced = traced
        self.named = named or {}  # shared intermediates rendered by name instead of inlined
        self.formula = formula
        self.cache: dict[fx.Node, tuple[str, int]] = {}

    def node_name(self, node: fx.Node) -> str:
        if node.op == "get_attr":
            return self.traced.parameter_names.get(node.target, str(node.target).replace(".", "_"))
        if node.op == "placeholder":
            return self.traced.placeholder_names.get(node, str(node.target))
        return node.name

    def value(self, value: Any) -> tuple[str, int]:
        if isinstance(value, fx.Node):
            return self.node(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _number(value), (_ATOM if value >= 0 else 0)
        if isinstance(value, (tuple, list)):
            items = [self.value(v)[0] for v in value]
            # A one-element tuple keeps its comma, as Python writes it: (8,), not the number (8).
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")", _ATOM
        return repr(value), _ATOM

    def text(self, value: Any) -> str:
        return self.value(value)[0]

    def node(self, node: fx.Node) -> tuple[str, int]:
        if node in self.named:
            return self.named[node], _ATOM
        if node not in self.cache:
            call = self.traced.calls.get(node)
            self.cache[node] = (self.node_name(node), _ATOM) if call is None else self.call(call)
        return self.cache[node]

    def call(self, call: OpCall) -> tuple[str, int]:
        operands = call.operands
        if call.name == "parameter_element":
            return f"{self.text(operands[0])}[{call.options['index']}]", _ATOM
        if call.family in (CAST, LAYOUT):
            return self.value(operands[0]) if operands else (call.name, _ATOM)
        if call.name in _INFIX and len(operands) == 2:
            symbol, precedence = _INFIX[call.name]
            left, left_precedence = self.value(operands[0])
            right, right_precedence = self.value(operands[1])
            if call.name in ("add", "sub") and call.options.get("alpha", 1) != 1:
                right, right_precedence = f"{self.text(call.options['alpha'])} * {_wrap(right, right_precedence, 2)}", 2
            # Left-associative except **: the right operand of - and / needs parentheses at equal precedence.
            left_needs = left_precedence < precedence or (call.name == "pow" and left_precedence == precedence)
            right_needs = right_precedence < precedence or (right_precedence == precedence and call.name != "pow")
            right_needs = right_needs and not (call.name in ("add", "mul") and right_precedence == precedence)
            left = f"({left})" if left_needs else left
            right = f"({right})" if right_needs else right
            return f"{left} {symbol} {right}", precedence
        if call.name in _COMPARISONS and len(operands) == 2:
            left, right = (self._marker(operands[0], operands[1]), self._marker(operands[1], operands[0]))
            return f"{left} {_COMPARISONS[call.name]} {right}", 0
        if call.family == META:
            return self._meta(call)
        if call.name in ("slice", "getitem") and "index" in call.options and not self.formula:
            return f"{self.value(operands[0])[0]}[{self._index(call.options['index'])}]", _ATOM
        if call.name == "neg":
            inner, precedence = self.value(operands[0])
            return f"-{_wrap(inner, precedence, 3)}", 3
        name = call.name
        options = dict(call.options)
        if name == "gelu" and options.get("approximate") == "tanh" and not self.formula:
            name, options = "gelu_tanh", {}
        elif name == "gelu" and options.get("approximate") == "none":
            options.pop("approximate", None)
        # x.max(dim=-1).values as written: a max whose gradient goes to the first index holding it, not amax
        values = bool(options.pop("first_index", False))
        name = {"amax": "max", "amin": "min"}[name] if values else name
        arguments = [self.text(operand) for operand in operands]
        for key, value in options.items():
            if key in _QUIET_OPTIONS and value == _QUIET_OPTIONS[key]:
                continue
            if key == "normalized_shape" and isinstance(value, (tuple, list)) and operands:
                # The trailing dims by count: the traced sizes are the probe's, not the module's.
                source, precedence = self.value(operands[0])
                arguments.append(f"{key}={_wrap(source, precedence, _ATOM)}.shape[-{len(value)}:]")
                continue
            if value is None and key in ("min", "max"):
                continue
            arguments.append(f"{key}={self.text(value)}")
        return f"{name}({', '.join(arguments)}){'.values' if values else ''}", _ATOM

    def _marker(self, value: Any, other: Any) -> str:
        """``value`` as written, or, where it is an int compared with a class-index input and an int hyper-parameter
        of the reference has it as its default, that hyper-parameter's name: the trace holds ints as numbers, and
        ``target != -100`` would say the kernel ignores -100 where it takes any ``ignore_index``."""
        if not self.formula and isinstance(value, int) and not isinstance(value, bool) and isinstance(other, fx.Node):
            if self.node_name(other) in self.traced.index_inputs:
                ints = [*self.traced.hyperparameters, *self.traced.init_params]  # a module's, from its __init__
                named = {hp.name for hp in ints if hp.type == "int" and hp.default == value}
                if len(named) == 1:
                    return named.pop()
        return self.text(value)

    def _index(self, index: Any) -> str:
        """A subscript as Python writes it: ``:, 0``, ``:half``, ``..., ::2``."""
        parts = []
        for item in index if isinstance(index, tuple) else (index,):
            if isinstance(item, slice):
                bounds = ["" if b is None else self.text(b) for b in (item.start, item.stop)]
                parts.append(":".join(bounds) + ("" if item.step is None else f":{self.text(item.step)}"))
            else:
                parts.append("..." if item is Ellipsis else self.text(item))
        return ", ".join(parts)

    def _meta(self, call: OpCall) -> tuple[str, int]:
        """``x.shape[0]``, ``x.size(-1)``, ``x.numel()``, ``x.shape[0] // 2`` as written."""
        node = call.node
        args = node.args
        if call.name == "size_arithmetic" and not self.formula:
            symbol = {operator.floordiv: "//", operator.mod: "%"}[node.target]
            return f"{self.text(args[0])} {symbol} {self.text(args[1])}", 2
        if call.name == "getitem" and isinstance(args[0], fx.Node):
            return f"{self.text(args[0])}[{self.text(args[1])}]", _ATOM
        if call.name in ("shape", "dtype", "device", "ndim"):
            return f"{self.text(args[0])}.{call.name}", _ATOM
        if call.name == "arange":  # torch.arange(n), torch.arange(start=0, end=n, device=x.device)
            written = [self.text(a) for a in args] + [f"{k}={self.text(v)}" for k, v in node.kwargs.items()]
            return f"torch.arange({', '.join(written)})", _ATOM
        rest = ", ".join(self.text(a) for a in args[1:])
        return f"{self.text(args[0])}.{call.name}({rest})", _ATOM


def _wrap(text: str, precedence: int, needed: int) -> str:
    return f"({text})" if precedence < needed else text


def forward_computation(traced: TracedReference) -> str:
    """``y = ...`` per output; an intermediate read more than once is written out first under the name the
    reference's assignment gives it (``logp = ...``), else its fx name (``getitem_1``)."""
    shared = []
    for node, call in traced.calls.items():
        readers = [user for user in node.users if user in traced.calls or user.op == "output"]
        if call.family not in (CAST, LAYOUT) and len(readers) > 1 and node not in traced.outputs:
            shared.append(node)
    describer = Describer(traced)
    written, _ = reference_names(traced.graph_module.graph, traced.loaded.source)
    taken = {*traced.tensor_inputs, *(hp.name for hp in traced.hyperparameters), *traced.output_names}
    taken |= {node.name for node in shared}
    statements = []
    for node in shared:
        name = written.get(node.name, node.name)
        if name != node.name and name in taken:
            name = node.name  # an input's, an output's or another value's name: the fx name says it is another
        taken.add(name)
        statements.append(f"{name} = {describer.text(node)}")
        describer.named[node] = name
    statements += [f"{name} = {describer.text(node)}" for name, node in zip(traced.output_names, traced.outputs)]
    return "; ".join(statements)
