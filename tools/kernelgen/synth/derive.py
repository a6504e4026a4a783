"""Derive the forward and backward Triton statements of an element-wise (tier 1) op.

Every gradient comes from ``sympy.diff`` of the forward expression, chained with the incoming gradients
``grad_{output}`` (summed over outputs). Each expression is simplified within a bounded budget, known constants
are named and common subexpressions hoisted with ``sympy.cse`` across all outputs (forward) or all gradients
(backward) jointly, as temporaries named by role (``naming.py``), and everything is printed by ``TritonPrinter``. The backward reads only inputs, parameters, hyperparameters and
``grad_{output}``: it recomputes the activations it needs (Liger style, save inputs only).

For a parameter, ``grad_{name}`` is its per-element contribution; the template sums it over rows ("channel") or
over everything ("scalar").
"""

from dataclasses import dataclass
from dataclasses import field

import sympy

from tools.kernelgen.synth.naming import FUNCTION_WORDS
from tools.kernelgen.synth.naming import constant_lines
from tools.kernelgen.synth.naming import hoist
from tools.kernelgen.synth.printer import format_formula
from tools.kernelgen.synth.printer import print_triton
from tools.kernelgen.synth.rules import is_condition
from tools.kernelgen.synth.simplify import simplify_bounded
from tools.kernelgen.synth.symbols import make_symbols

PARAMETER_KINDS = ("channel", "scalar")


@dataclass
class ElementwiseMath:
    forward: list[str]  # Triton statements; the last ones assign every output name
    backward: list[str]  # statements assigning grad_{name} for every input and parameter
    forward_uses: list[str]  # inputs/parameters/hyperparameters the forward reads (sorted)
    backward_uses: list[str]  # inputs/parameters/hyperparameters/grad_{output} the backward reads (sorted)
    gradient_formulas: dict[str, str] = field(default_factory=dict)  # grad_{name} -> readable simplified formula
    forward_formulas: dict[str, str] = field(default_factory=dict)  # output -> readable formula
    precision_sensitive_ops: list[str] = field(default_factory=list)  # ops that need fp32 (exp, sigmoid, tanh...)
    # The leading statements of ``backward`` that define named constants (``sqrt_2_over_pi = 0.797...``): the
    # template puts them above a loop over rows
    backward_constants: list[str] = field(default_factory=list)


# The functions whose results need fp32 (precision-sensitive), by the word ``naming.py`` calls them.
_PRECISION_SENSITIVE = frozenset({"sigmoid", "softplus", "logsigmoid", "tanh", "exp", "log", "erf", "sin", "cos"})
# Powers printed as a root (tl.sqrt / tl.rsqrt), by op name.
_ROOTS = {sympy.S.Half: "sqrt", -sympy.S.Half: "rsqrt"}


def _statements(assignments: dict[str, sympy.Expr], taken: set[str]) -> tuple[list[str], list[str]]:
    """The named constants ``assignments`` read, and ``name = expr`` lines for them, common subexpressions first as
    temporaries named by role (``naming.py``)."""
    names = list(assignments)
    constants, definitions, reduced = hoist([assignments[name] for name in names], set(taken))
    lines = [f"{symbol.name} = {print_triton(value)}" for symbol, value in definitions]
    lines += [f"{name} = {print_triton(expr)}" for name, expr in zip(names, reduced)]
    return constant_lines(constants), lines


def _precision_sensitive_ops(exprs) -> list[str]:
    found = set()
    for expr in exprs:
        for node in sympy.preorder_traversal(expr):
            if isinstance(node, sympy.Expr) and node.is_number:
                continue  # constants such as sqrt(2 / pi) are folded into literals
            for kind, name in FUNCTION_WORDS.items():
                if name in _PRECISION_SENSITIVE and isinstance(node, kind):
                    found.add(name)
            if isinstance(node, sympy.Pow) and not node.exp.is_Integer:
                found.add(_ROOTS.get(node.exp, "pow"))
            elif isinstance(node, sympy.Pow) and node.exp.is_negative:
                found.add("div")  # reciprocals of bf16 values lose precision unless computed in fp32
    return sorted(found)


def _drop_singular_terms(expr: sympy.Expr) -> sympy.Expr:
    """Derivatives of steps (sign, indicators) are zero almost everywhere, as in torch.autograd."""
    expr = expr.replace(lambda node: isinstance(node, sympy.DiracDelta), lambda node: sympy.S.Zero)
    if expr.has(sympy.Derivative):
        raise ValueError(f"sympy could not differentiate part of {expr}")
    return expr


def _bind_symbols(expr, symbols: dict[str, sympy.Symbol], output: str) -> sympy.Expr:
    """``expr`` over our real symbols (a caller's plain ``Symbol("x")`` is the same variable); unknown names raise."""
    expr = sympy.sympify(expr)
    if is_condition(expr):
        raise ValueError(f"output {output!r} is a condition ({expr}), not a number; wrap it in where(...)")
    unknown = sorted(symbol.name for symbol in expr.free_symbols if symbol.name not in symbols)
    if unknown:
        raise ValueError(f"output {output!r} uses undeclared names {unknown}; declared: {sorted(symbols)}")
    expr = expr.xreplace({symbol: symbols[symbol.name] for symbol in expr.free_symbols})
    if not expr.free_symbols:
        raise ValueError(f"output {output!r} is the constant {expr}; it must depend on an input")
    return expr


def synthesize_elementwise(
    outputs: dict[str, sympy.Expr],
    inputs: list[str],
    parameters: dict[str, str] | None = None,
    hyperparameters: list[str] | None = None,
) -> ElementwiseMath:
    """Forward and backward statements of the element-wise op ``outputs`` (name -> expression over the names)."""
    parameters = dict(parameters or {})
    hyperparameters = list(hyperparameters or [])
    for name, kind in parameters.items():
        if kind not in PARAMETER_KINDS:
            raise ValueError(f"parameter {name!r} has kind {kind!r}; expected one of {PARAMETER_KINDS}")
    if not outputs:
        raise ValueError("an element-wise op needs at least one output")
    symbols = make_symbols([*inputs, *parameters, *hyperparameters])
    differentiable = [*inputs, *parameters]
    grad_outputs = make_symbols([f"grad_{name}" for name in outputs])
    make_symbols(list(outputs))  # output names must be valid identifiers too
    clashes = sorted((set(outputs) | set(grad_outputs)) & (set(symbols) | {f"grad_{n}" for n in differentiable}))
    if clashes:
        raise ValueError(f"names {clashes} are used both as outputs (or their gradients) and as inputs")

    forward_exprs = {name: simplify_bounded(_bind_symbols(expr, symbols, name)) for name, expr in outputs.items()}

    gradients: dict[str, sympy.Expr] = {}
    for name in differentiable:
        terms = []
        for output, expr in forward_exprs.items():
            derivative = simplify_bounded(_drop_singular_terms(sympy.diff(expr, symbols[name])))
            terms.append(grad_outputs[f"grad_{output}"] * derivative)
        gradients[f"grad_{name}"] = sympy.Add(*terms)

    taken = set(symbols) | set(outputs) | set(grad_outputs) | set(gradients)
    forward_constants, forward = _statements(forward_exprs, taken)
    nonzero = {name: expr for name, expr in gradients.items() if expr != 0}
    backward_constants, backward = _statements(nonzero, taken) if nonzero else ([], [])
    # A gradient that is identically zero still has to be a tensor the template can store.
    backward += [f"{name} = tl.zeros_like({name[len('grad_') :]})" for name, expr in gradients.items() if expr == 0]

    forward_uses = {symbol.name for expr in forward_exprs.values() for symbol in expr.free_symbols}
    backward_uses = {symbol.name for expr in nonzero.values() for symbol in expr.free_symbols}
    backward_uses |= {name[len("grad_") :] for name, expr in gradients.items() if expr == 0}
    return ElementwiseMath(
        forward=forward_constants + forward,
        backward=backward_constants + backward,
        backward_constants=backward_constants,
        forward_uses=sorted(forward_uses),
        backward_uses=sorted(backward_uses),
        gradient_formulas={name: format_formula(expr) for name, expr in gradients.items()},
        forward_formulas={name: format_formula(expr) for name, expr in forward_exprs.items()},
        precision_sensitive_ops=_precision_sensitive_ops([*forward_exprs.values(), *gradients.values()]),
    )


__all__ = ["PARAMETER_KINDS", "ElementwiseMath", "make_symbols", "synthesize_elementwise"]
