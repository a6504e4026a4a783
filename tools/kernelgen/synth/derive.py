"""Derive the forward and backward statements of an element-wise (tier 1) op, in Triton or TileLang.

Every gradient comes from ``sympy.diff`` of the forward expression, chained with the incoming gradients
``grad_{output}`` (summed over outputs). Each expression is simplified within a bounded budget, known constants
are named and common subexpressions hoisted with ``sympy.cse`` across all outputs (forward) or all gradients
(backward) jointly, as temporaries named by role (``naming.py``), and everything is printed by the kernel language's printer (``TritonPrinter`` or ``TileLangPrinter``): the math is
derived once (``derive_elementwise``) and printed in either language (``print_elementwise``). The backward reads
only inputs, parameters, hyperparameters and ``grad_{output}``: it recomputes the activations it needs (Liger
style, save inputs only).

For a parameter, ``grad_{name}`` is its per-element contribution; the template sums it over rows ("channel") or
over everything ("scalar").
"""

from dataclasses import dataclass
from dataclasses import field

import sympy

from tools.kernelgen.synth.functions import CastToInput
from tools.kernelgen.synth.functions import Erfc
from tools.kernelgen.synth.functions import Expm1
from tools.kernelgen.synth.functions import KernelForm
from tools.kernelgen.synth.functions import Log1p
from tools.kernelgen.synth.functions import Log1pOfUnit
from tools.kernelgen.synth.functions import Root
from tools.kernelgen.synth.functions import TensorPower
from tools.kernelgen.synth.functions import in_unit_interval
from tools.kernelgen.synth.functions import select
from tools.kernelgen.synth.naming import FUNCTION_WORDS
from tools.kernelgen.synth.naming import TemporaryNames
from tools.kernelgen.synth.naming import constant_lines
from tools.kernelgen.synth.naming import hoist
from tools.kernelgen.synth.naming import renamed_name
from tools.kernelgen.synth.printer import TritonPrinter
from tools.kernelgen.synth.printer import format_formula
from tools.kernelgen.synth.printer import printing_written_constants
from tools.kernelgen.synth.printer import uniform_symbols
from tools.kernelgen.synth.printer import written_constants
from tools.kernelgen.synth.rules import is_condition
from tools.kernelgen.synth.simplify import simplify_bounded
from tools.kernelgen.synth.symbols import make_symbols
from tools.kernelgen.synth.transcendentals import share_transcendentals

PARAMETER_KINDS = ("channel", "scalar")


@dataclass
class ElementwiseMath:
    forward: list[str]  # statements of the kernel language; the last ones assign every output name
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
_PRECISION_SENSITIVE = frozenset(
    {"sigmoid", "softplus", "logsigmoid", "logaddexp", "tanh", "exp", "log", "erf", "sin", "cos"}
)
# Powers printed as a root (tl.sqrt / tl.rsqrt), by op name.
_ROOTS = {sympy.S.Half: "sqrt", -sympy.S.Half: "rsqrt"}


def _statements(
    assignments: dict[str, sympy.Expr],
    taken: set[str],
    printer,
    uniform: frozenset[str] = frozenset(),
    written: frozenset = frozenset(),
) -> tuple[list[str], list[str]]:
    """The named constants ``assignments`` read (where the language names them) and the reciprocals of the
    kernel-uniform values they divide by, then ``name = expr`` lines for them, common subexpressions first as
    temporaries named by role (``naming.py``). ``written``: the forward's own decimals, whose multiples print as such
    (``printer.written_constants``)."""
    names = list(assignments)
    taken = set(taken)
    exprs = [assignments[name] for name in names]
    reciprocals: list[tuple[sympy.Symbol, sympy.Expr]] = []
    # A reciprocal is a named local like the named constants, which languages that do not name those cannot hold
    # as an fp32 value (TileLang's T.Parallel bodies).
    if printer.named_constants:
        exprs, reciprocals = _uniform_reciprocals(exprs, uniform, taken)
    constants, definitions, reduced = hoist(exprs, taken, name_constants=printer.named_constants)
    with uniform_symbols(uniform), printing_written_constants(written):
        lines = [f"{symbol.name} = {printer.doprint(value)}" for symbol, value in definitions]
        lines += [f"{name} = {printer.doprint(expr)}" for name, expr in zip(names, reduced)]
    reciprocal_lines = [f"{symbol.name} = {printer.reciprocal(base)}" for symbol, base in reciprocals]
    return constant_lines(constants) + reciprocal_lines, lines


def _uniform_reciprocals(
    exprs: list[sympy.Expr], uniform: frozenset[str], taken: set[str]
) -> tuple[list[sympy.Expr], list[tuple[sympy.Symbol, sympy.Expr]]]:
    """``exprs`` with each division by a value the same for every element (a hyper-parameter, a scalar parameter:
    the ``uniform`` names) written as a product with its reciprocal, computed once per program, and the
    ``(reciprocal, value)`` pairs. Triton's fp32 division is a reciprocal and a multiply with a range check per
    element; on an H200 softplus_gate's backward at 16384 x 14336 bf16 ran 568.0 us with ``/ beta``, 543.5 with
    ``* inv_beta`` (44 -> 37 registers), its forward alike (330.3, 331.5). Both forms are within 2 ulps."""
    symbols: dict[sympy.Expr, sympy.Symbol] = {}
    names = TemporaryNames(taken)

    def is_uniform_division(node) -> bool:
        return (
            isinstance(node, sympy.Pow)
            and node.exp.is_Integer
            and node.exp < 0
            and not node.base.is_number
            and {symbol.name for symbol in node.base.free_symbols} <= uniform
        )

    def reciprocal(node) -> sympy.Expr:
        if node.base not in symbols:
            symbols[node.base] = names.name(1 / node.base)
        return symbols[node.base] ** -node.exp

    rewritten = [expr.replace(is_uniform_division, reciprocal) for expr in exprs]
    return rewritten, [(symbol, base) for base, symbol in symbols.items()]


def _precision_sensitive_ops(exprs) -> list[str]:
    found = set()
    for expr in exprs:
        # A value computed by a cheaper form is as precision-sensitive as the function it stands for.
        expr = expr.replace(lambda node: isinstance(node, (KernelForm, Root)), lambda node: node.as_builtin())
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


def differentiate(expr: sympy.Expr, symbol: sympy.Symbol, differentiated: set[sympy.Symbol]) -> sympy.Expr:
    """``tidy_derivative(sympy.diff(expr, symbol))`` with torch's derivatives of each power whose exponent holds a
    ``differentiated`` symbol (``TensorPower``; of a variable base, or of 0 where a clamp's branch pushed the power in);
    a power of a constant or hyper-parameter exponent, or of a non-zero number, is sympy's."""

    def variable_power(node) -> bool:
        if not isinstance(node, sympy.Pow) or not node.exp.free_symbols & differentiated:
            return False
        return not node.base.is_number or node.base == 0

    powers = expr.replace(variable_power, lambda node: TensorPower(node.base, node.exp))
    derivative = tidy_derivative(sympy.diff(powers, symbol))
    if powers == expr:
        return derivative
    # Such a power's derivatives are infinite where its base is 0 and its exponent below 1 (relu(x) ** p, p < 1): an
    # indicator multiplying one selects instead, as torch's masked backwards do (0 * inf would be NaN).
    derivative = derivative.replace(_indicator_product, _selected_product)
    return derivative.replace(TensorPower, lambda base, exponent: base**exponent)


def _is_indicator(node) -> bool:
    return (
        isinstance(node, sympy.Piecewise)
        and len(node.args) == 2
        and node.args[0].expr == 1
        and node.args[1].expr == 0
        and node.args[1].cond == sympy.true
    )


def _indicator_product(node) -> bool:
    return isinstance(node, sympy.Mul) and any(_is_indicator(factor) for factor in node.args)


def _selected_product(node) -> sympy.Expr:
    """``indicator(c) * rest`` as ``where(c, rest, 0)`` (several indicators: nested)."""
    conditions = [factor.args[0].cond for factor in node.args if _is_indicator(factor)]
    rest = sympy.Mul(*(factor for factor in node.args if not _is_indicator(factor)))
    for condition in conditions:
        rest = select(condition, rest, sympy.S.Zero)
    return rest


def tidy_derivative(expr: sympy.Expr) -> sympy.Expr:
    """A derivative from ``sympy.diff`` as the kernels compute it: derivatives of steps (sign, indicators) are zero
    almost everywhere, as in torch.autograd, and each power over a run-time or fractional exponent divided by its
    own base is one power (``merge_power_quotients``)."""
    expr = expr.replace(lambda node: isinstance(node, sympy.DiracDelta), lambda node: sympy.S.Zero)
    # sympy leaves some derivatives it can take unevaluated (|s|' of a statistic s as sign(s) * Derivative(s, s)).
    expr = expr.replace(lambda node: isinstance(node, sympy.Derivative), lambda node: node.doit())
    if expr.has(sympy.Derivative):
        raise ValueError(f"sympy could not differentiate part of {expr}")
    # A step's derivative multiplying the rest selects it, as torch's masked backwards do: the rest may be NaN where
    # the step is 0 (exp(-max + x) of a row masked whole, max being -inf), and 0 * NaN would be NaN.
    expr = expr.replace(_indicator_product, _selected_product)
    return merge_power_quotients(expr)


def merge_power_quotients(expr: sympy.Expr) -> sympy.Expr:
    """``b**p / b**k`` as ``b**(p - k)`` in every product, for an exponent ``p`` sympy does not combine itself (a
    hyper-parameter, a fractional power of a symbolic base's power). ``sympy.diff`` writes the derivative of ``b**p``
    as ``p * b**p / b``: 0 / 0 where ``b`` is 0, where torch's ``p * b**(p - 1)`` is finite (``|x| ** 1.5`` at 0,
    a focal loss's ``(1 - p) ** gamma`` on a confident row). Not ``sympy.powsimp``: it also merges ``exp(a) *
    exp(b)``, which would rewrite every kernel's shared exponentials."""

    def exponents_by_base(node: sympy.Mul) -> dict[sympy.Expr, list[sympy.Expr]]:
        powers: dict[sympy.Expr, list[sympy.Expr]] = {}
        for factor in node.args:
            base, exponent = factor.as_base_exp()
            powers.setdefault(base, []).append(exponent)
        return powers

    def has_quotient(node) -> bool:
        return isinstance(node, sympy.Mul) and any(
            not base.is_number
            and any(e.is_number and e.is_negative for e in exponents)
            and any(not e.is_Integer for e in exponents)
            for base, exponents in exponents_by_base(node).items()
        )

    def merge(node: sympy.Mul) -> sympy.Expr:
        return sympy.Mul(*(sympy.Pow(base, sympy.Add(*e)) for base, e in exponents_by_base(node).items()))

    return expr.replace(has_quotient, merge)


def _bind_symbols(expr, symbols: dict[str, sympy.Symbol], output: str) -> sympy.Expr:
    """``expr`` over our real symbols (a caller's plain ``Symbol("x")`` is the same variable); unknown names raise."""
    expr = sympy.sympify(expr)
    if is_condition(expr):
        raise ValueError(
            f"output {output!r} is a condition ({expr}), not a number: a kernel's outputs are numbers (compare "
            "outside the kernel, or write where(...) in a profile)"
        )
    unknown = sorted(symbol.name for symbol in expr.free_symbols if symbol.name not in symbols)
    if unknown:
        raise ValueError(f"output {output!r} uses undeclared names {unknown}; declared: {sorted(symbols)}")
    expr = expr.xreplace({symbol: symbols[symbol.name] for symbol in expr.free_symbols})
    if not expr.free_symbols:
        raise ValueError(f"output {output!r} is the constant {expr}; it must depend on an input")
    return expr


def _segments(expr: sympy.Expr) -> list[CastToInput]:
    """The roundings directly inside ``expr``: those not nested in another rounding of ``expr``."""
    found, stack = [], [expr]
    while stack:
        node = stack.pop()
        for arg in node.args:
            if isinstance(arg, CastToInput):
                if arg not in found:
                    found.append(arg)
            else:
                stack.append(arg)
    return found


def _rounded_reverse_mode(forward_exprs, seeds, leaves: dict[str, sympy.Symbol]) -> dict[str, sympy.Expr]:
    """Gradients as eager PyTorch computes them when each op rounds its result (``cast_to_input``): every op's
    backward hands its input gradients on rounded to the inputs' dtype. The expressions are cut into segments at
    the roundings; within a segment the chain rule is ``sympy.diff`` (one fused fp32 op, as torch's backward of one
    op computes in fp32), and the adjoint arriving at a rounding is rounded before it flows into the rounded op's
    own body. Contributions to a value read by several ops are each rounded, then summed, as autograd accumulates
    bf16 gradients. Without roundings this is ``sympy.diff`` of the whole expression."""
    # Segments in topological order: a rounding after every segment that reads it.
    order, parents = [], {}
    stack = list(forward_exprs.values())
    while stack:
        node = stack.pop()
        for inner in _segments(node if node in seeds else node.args[0]):
            parents.setdefault(inner, []).append(node)
            stack.append(inner)
    visited: set = set()

    def visit(node):
        if node in visited:
            return
        visited.add(node)
        for parent in parents.get(node, []):
            visit(parent)
        order.append(node)

    for node in [*forward_exprs.values(), *parents]:
        visit(node)
    contributions: dict[sympy.Expr, list[sympy.Expr]] = {node: [seed] for node, seed in seeds.items()}
    leaf_terms: dict[str, list[sympy.Expr]] = {name: [] for name in leaves}
    for node in order:
        terms = contributions.get(node, [])
        if not terms:
            continue
        if node in seeds:
            adjoint, body = sympy.Add(*terms), node
        else:  # the gradient of a rounded op's output is a tensor of the inputs' dtype
            adjoint = CastToInput(sympy.Add(*[CastToInput(term) for term in terms]))
            body = node.args[0]
        inner = _segments(body)
        dummies = {rounding: sympy.Dummy("rounded", real=True) for rounding in inner}
        local = body.xreplace(dummies)
        # A power's exponent is differentiated when it holds a leaf or a rounded value standing for one.
        differentiated = set(leaves.values()) | set(dummies.values())
        for rounding, dummy in dummies.items():
            derivative = differentiate(local, dummy, differentiated).xreplace({d: r for r, d in dummies.items()})
            if derivative != 0:
                contributions.setdefault(rounding, []).append(adjoint * derivative)
        for name, symbol in leaves.items():
            derivative = differentiate(local, symbol, differentiated).xreplace({d: r for r, d in dummies.items()})
            if derivative != 0:
                leaf_terms[name].append(adjoint * simplify_bounded(derivative))
    gradients = {}
    for name, terms in leaf_terms.items():
        rounded = terms if len(terms) < 2 else [CastToInput(term) for term in terms]
        gradients[f"grad_{name}"] = sympy.Add(*rounded)
    return gradients


@dataclass(frozen=True)
class ElementwiseDerivation:
    """The derived math before printing: each output's and each gradient's simplified expression."""

    forward: dict[str, sympy.Expr]  # output -> expression
    gradients: dict[str, sympy.Expr]  # grad_{input or parameter} -> expression (0 when identically zero)
    taken: frozenset[str]  # every name the statements may not reuse for a temporary
    uniform: frozenset[str] = frozenset()  # names the same for every element: hyper-parameters, scalar parameters


def renamed_derivation(derivation: ElementwiseDerivation, mapping: dict[str, str]) -> ElementwiseDerivation:
    """``derivation`` with its names renamed by ``mapping`` (``grad_{name}`` follows ``name``): symbols, outputs,
    gradients and the names taken."""

    def renamed(name: str) -> str:
        return renamed_name(name, mapping)

    def over_renamed_symbols(expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace({s: sympy.Symbol(renamed(s.name), real=True) for s in expr.free_symbols})

    return ElementwiseDerivation(
        forward={renamed(name): over_renamed_symbols(expr) for name, expr in derivation.forward.items()},
        gradients={renamed(name): over_renamed_symbols(expr) for name, expr in derivation.gradients.items()},
        taken=frozenset(map(renamed, derivation.taken)),
        uniform=frozenset(map(renamed, derivation.uniform)),
    )


def derive_elementwise(
    outputs: dict[str, sympy.Expr],
    inputs: list[str],
    parameters: dict[str, str] | None = None,
    hyperparameters: list[str] | None = None,
) -> ElementwiseDerivation:
    """Forward and gradient expressions of the element-wise op ``outputs`` (name -> expression over the names)."""
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

    seeds = {expr: grad_outputs[f"grad_{output}"] for output, expr in forward_exprs.items()}
    if any(expr.has(CastToInput) for expr in forward_exprs.values()):
        gradients = _rounded_reverse_mode(forward_exprs, seeds, {name: symbols[name] for name in differentiable})
    else:
        gradients = {}
        differentiated = {symbols[name] for name in differentiable}
        for name in differentiable:
            terms = []
            for output, expr in forward_exprs.items():
                derivative = simplify_bounded(differentiate(expr, symbols[name], differentiated))
                terms.append(grad_outputs[f"grad_{output}"] * derivative)
            gradients[f"grad_{name}"] = sympy.Add(*terms)
    taken = frozenset(set(symbols) | set(outputs) | set(grad_outputs) | set(gradients))
    # Each kernel's expressions share their transcendental calls (snake's backward: sin(2u) onto sin(u), cos(u)).
    uniform = frozenset([*hyperparameters, *(name for name, kind in parameters.items() if kind == "scalar")])
    return ElementwiseDerivation(
        forward=share_transcendentals(forward_exprs),
        gradients=share_transcendentals(gradients),
        taken=taken,
        uniform=uniform,
    )


# Functions that cost a forward next to nothing beside its tanh: rounding to the inputs' dtype, |u|.
_CHEAP_FUNCTIONS = (CastToInput, sympy.Abs)


def _tanh_is_the_only_transcendental(exprs) -> bool:
    functions = {type(f) for expr in exprs for f in expr.atoms(sympy.Function)}
    return sympy.tanh in functions and all(f is sympy.tanh or issubclass(f, _CHEAP_FUNCTIONS) for f in functions)


def _pass_printer(printer_class, library: str | None, light: bool):
    libdevice_printer = getattr(printer_class, "libdevice_printer_class", None)
    wants_libdevice = library == "libdevice" or (library is None and light)
    return (libdevice_printer if wants_libdevice and libdevice_printer else printer_class)()


def with_accurate_forms(exprs: dict[str, sympy.Expr], printer) -> dict[str, sympy.Expr]:
    """``exprs`` with the forms ``printer`` prints by functions of their own, before temporaries are named (``1 + v``
    as a temporary would print as ``log(temporary)``, and a named ``v`` hides its range): each ``log(1 + v)`` as
    ``Log1pOfUnit(v)`` where ``v`` is provably in [0, 1], else ``Log1p(v)``; ``k * exp(v) - k`` as ``k * Expm1(v)``
    and ``k - k * erf(v)`` as ``k * Erfc(v)`` (``torch.expm1``, ELU's negative side, ``torch.erfc``, as the rules
    build them and sympy distributes them). Tier-1 passes and the row and loss programs' statements alike."""

    def log1p_of(node) -> sympy.Expr | None:
        if not (isinstance(node, sympy.log) and isinstance(node.args[0], sympy.Add) and 1 in node.args[0].args):
            return None
        v = node.args[0] - 1
        if printer.prints_unit_log1p and in_unit_interval(v):
            return Log1pOfUnit(v)
        return Log1p(v) if printer.prints_log1p else None

    def expm1_or_erfc_of(node) -> sympy.Expr | None:
        """A sum holding ``k * f(v)`` and ``-k``: ``k * (exp(v) - 1)`` or ``-k * (1 - erf(v))``."""
        if not isinstance(node, sympy.Add):
            return None
        terms = list(node.args)
        for term in terms:
            factors = sympy.Mul.make_args(term)
            for function, made, sign in ((sympy.exp, Expm1, 1), (sympy.erf, Erfc, -1)):
                found = next((f for f in factors if isinstance(f, function)), None)
                k = sympy.Mul(*[f for f in factors if f is not found]) if found is not None else None
                if k is None or -k not in terms:
                    continue
                rest = [t for t in terms if t is not term]
                rest.remove(-k)
                return sympy.Add(sign * k * made(found.args[0]), *rest)
        return None

    def rewritten(expr: sympy.Expr) -> sympy.Expr:
        expr = expr.replace(lambda node: log1p_of(node) is not None, log1p_of)
        if printer.prints_expm1_erfc:
            expr = expr.replace(lambda node: expm1_or_erfc_of(node) is not None, expm1_or_erfc_of)
        return expr

    return {name: rewritten(expr) for name, expr in exprs.items()}


def print_elementwise(
    derivation: ElementwiseDerivation,
    printer_class=TritonPrinter,
    forward_math: str | None = None,
    backward_math: str | None = None,
) -> ElementwiseMath:
    """The derived math as statements of the kernel language ``printer_class`` prints. ``forward_math`` and
    ``backward_math`` choose each pass's functions where the language has a choice (``profile.MATH_LIBRARIES``):
    ``core``, formulas of core ``tl`` ops; ``libdevice``, libdevice's tanh and log1p (``TritonLibdevicePrinter``);
    None, the measured default: libdevice's in a forward whose only transcendental is tanh, core ops elsewhere."""
    backward_printer = _pass_printer(printer_class, backward_math, light=False)
    taken = set(derivation.taken)
    forward_exprs, gradients = derivation.forward, derivation.gradients
    light = _tanh_is_the_only_transcendental(forward_exprs.values())
    forward_printer = _pass_printer(printer_class, forward_math, light)
    uniform = derivation.uniform
    written = written_constants(forward_exprs.values())
    forward_constants, forward = _statements(
        with_accurate_forms(forward_exprs, forward_printer), taken, forward_printer, uniform, written
    )
    nonzero = {name: expr for name, expr in gradients.items() if expr != 0}
    printed_gradients = with_accurate_forms(nonzero, backward_printer)
    backward_constants, backward = (
        _statements(printed_gradients, taken, backward_printer, uniform, written) if nonzero else ([], [])
    )
    # A gradient that is identically zero still has to be a value the template can store.
    backward += [
        f"{name} = {backward_printer.zeros_like(name[len('grad_') :])}" for name, expr in gradients.items() if expr == 0
    ]

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


def synthesize_elementwise(
    outputs: dict[str, sympy.Expr],
    inputs: list[str],
    parameters: dict[str, str] | None = None,
    hyperparameters: list[str] | None = None,
    printer_class=TritonPrinter,
) -> ElementwiseMath:
    """Forward and backward statements of the element-wise op ``outputs`` (name -> expression over the names)."""
    return print_elementwise(derive_elementwise(outputs, inputs, parameters, hyperparameters), printer_class)


__all__ = [
    "PARAMETER_KINDS",
    "ElementwiseDerivation",
    "ElementwiseMath",
    "derive_elementwise",
    "make_symbols",
    "print_elementwise",
    "synthesize_elementwise",
]
