"""Parse a formula written with the canonical op names (``"x * sigmoid(x)"``) into a sympy expression.

The text is parsed with Python's ``ast`` and walked node by node; nothing is ever ``eval``-ed, so a formula can
only name the declared variables, ``pi``, numbers and the ops of the table (``torch.sigmoid``/``F.gelu`` are read
as ``sigmoid``/``gelu``). Operators map to ops too: ``+ - * / **``, comparisons, and ``& | ~`` between conditions.

With ``round_each_op``, every op whose result is a tensor (it reads a tensor variable) is followed by a rounding to
the inputs' dtype (``cast_to_input``), as eager PyTorch rounds each op's result; the formula's own result is left to
the store.
"""

import ast

import sympy

from tools.kernelgen.synth.rules import apply_op
from tools.kernelgen.synth.symbols import make_symbols

_BINARY_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}
_COMPARISONS = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}
_CONSTANTS = {"pi": sympy.pi, "inf": sympy.oo}  # inf: a masked fill's -inf


class _FormulaBuilder(ast.NodeVisitor):
    def __init__(self, symbols: dict[str, sympy.Symbol], tensors: frozenset[sympy.Symbol] = frozenset()):
        self.symbols = symbols
        self.tensors = tensors  # their ops round, when rounding each op
        self.root = None

    def visit(self, node):
        value = super().visit(node)
        if node is self.root or not isinstance(node, (ast.UnaryOp, ast.BinOp, ast.Call)):
            return value
        if isinstance(value, sympy.Expr) and value.free_symbols & self.tensors:
            return apply_op("cast_to_input", value)
        return value

    def generic_visit(self, node):
        raise ValueError(f"unsupported syntax in formula: {ast.dump(node)[:80]}")

    def visit_Constant(self, node):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise ValueError(f"unsupported constant in formula: {node.value!r}")

    def visit_Name(self, node):
        if node.id in self.symbols:
            return self.symbols[node.id]
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ValueError(f"unknown name {node.id!r} in formula; declared variables: {sorted(self.symbols)}")

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return apply_op("neg", operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Invert):
            return sympy.Not(operand)
        return self.generic_visit(node)

    def visit_BinOp(self, node):
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.BitAnd):
            return sympy.And(left, right)
        if isinstance(node.op, ast.BitOr):
            return sympy.Or(left, right)
        op = _BINARY_OPS.get(type(node.op))
        if op is None:
            return self.generic_visit(node)
        return apply_op(op, left, right)

    def visit_Compare(self, node):
        operands = [self.visit(node.left)] + [self.visit(comparator) for comparator in node.comparators]
        parts = []
        for operator, left, right in zip(node.ops, operands, operands[1:]):
            op = _COMPARISONS.get(type(operator))
            if op is None:
                return self.generic_visit(node)
            parts.append(apply_op(op, left, right))
        return sympy.And(*parts) if len(parts) > 1 else parts[0]

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name):
            name = node.func.id
        elif isinstance(node.func, ast.Attribute):
            name = node.func.attr  # torch.sigmoid, F.gelu, torch.nn.functional.silu
        else:
            return self.generic_visit(node)
        if any(keyword.arg is None for keyword in node.keywords):
            raise ValueError(f"{name}: **kwargs are not supported in formulas")
        args = [self.visit(arg) for arg in node.args]
        kwargs = {keyword.arg: self.visit(keyword.value) for keyword in node.keywords}
        return apply_op(name, *args, **kwargs)


def parse_formula(text: str, names: list[str], round_each_op: tuple[str, ...] = ()) -> sympy.Expr:
    """The sympy expression of ``text``, over ``make_symbols(names)``; ``round_each_op`` names the tensors whose
    ops round their results as eager PyTorch does (none: fp32 throughout).

    Unknown functions raise ``UnsupportedOpError`` (with the nearest op names), unknown variables and other syntax
    ``ValueError``.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"formula {text!r} is not a valid expression: {error.msg}") from None
    symbols = make_symbols(names)
    builder = _FormulaBuilder(symbols, frozenset(symbols[name] for name in round_each_op))
    builder.root = tree.body
    return builder.visit(tree.body)


__all__ = ["parse_formula"]
