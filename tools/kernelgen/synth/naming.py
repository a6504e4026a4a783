"""Names for what printed kernels compute, so generated math reads as written by hand.

Named constants. A number that is a rational multiple of a product of powers of known constants (square roots of
integers, ``pi``, ``e``, ``log(n)``) becomes a local of that name, spelled from its factors: ``sqrt(2 / pi)`` is
``sqrt_2_over_pi``, ``1 / sqrt(2)`` (sympy's ``sqrt(2) / 2``) ``inv_sqrt_2``, ``log(2)`` ``ln2``; the rational
multiple stays a literal beside it (``0.5 * sqrt_2_over_pi``). Plain decimals (the reference's ``0.044715``) stay
literals: they are the reference's own numbers.

Temporaries. A common subexpression is named after what it is, spelled from its structure over the names it reads:
``tanh(alpha * x)`` is ``tanh_alpha_x``, ``a / 2`` ``half_a``, ``1 / softmax_sum`` ``inv_softmax_sum``, ``x - mean``
``x_minus_mean``, ``a > limit`` ``a_gt_limit``, ``1 - tanh(u) ** 2`` (tanh's derivative, written with a temporary
``t = tanh(u)``) ``d`` + the temporary's name. A description longer than ``MAX_WORDS`` words or ``MAX_CHARS``
characters is replaced by the outermost operation's word and ``inner`` (``tanh_inner``: the tanh of a longer
argument) or the product's or sum's leading factor (``..._term``). Names already taken get a number.
"""

from __future__ import annotations

import keyword

import sympy

from tools.kernelgen.synth.functions import CastToInput
from tools.kernelgen.synth.functions import Detached
from tools.kernelgen.synth.functions import KernelForm
from tools.kernelgen.synth.functions import Log1p
from tools.kernelgen.synth.functions import LogAddExp
from tools.kernelgen.synth.functions import LogSigmoid
from tools.kernelgen.synth.functions import Maximum
from tools.kernelgen.synth.functions import Minimum
from tools.kernelgen.synth.functions import Relu
from tools.kernelgen.synth.functions import Sigmoid
from tools.kernelgen.synth.functions import SigmoidOfLog
from tools.kernelgen.synth.functions import Softplus
from tools.kernelgen.synth.functions import TanhOfLog1p
from tools.kernelgen.synth.printer import float_literal

MAX_WORDS = 4
MAX_CHARS = 28
# Names the templates' own code uses around the printed statements (Triton's and TileLang's), and the helpers those
# statements call.
RESERVED = frozenset(
    {
        "abs",
        "block_cols",
        "block_rows",
        "col",
        "col_block",
        "col_mask",
        "col_start",
        "cols",
        "float",
        "input_dtype",
        "kernel",
        "mask",
        "max",
        "min",
        "n_cols",
        "n_row_programs",
        "n_rows",
        "offsets",
        "pow",
        "row",
        "row_block",
        "row_mask",
        "row_program",
        "row_start",
        "row_step",
        "start",
        "sum",
        "T",
        "tanh",
        "threads",
        "tile_col",
        "tile_row",
        "tile_rows",
        "tl",
        "triton",
    }
)
_RESERVED_SUFFIXES = ("_ptr", "_row_stride", "_acc", "_partial", "_chunk", "_previous")

FUNCTION_WORDS = {
    sympy.tanh: "tanh",
    sympy.exp: "exp",
    sympy.log: "log",
    sympy.erf: "erf",
    sympy.sin: "sin",
    sympy.cos: "cos",
    sympy.Abs: "abs",
    sympy.sign: "sign",
    Sigmoid: "sigmoid",
    SigmoidOfLog: "sigmoid_log",
    TanhOfLog1p: "tanh_log1p",
    Softplus: "softplus",
    LogSigmoid: "logsigmoid",
    LogAddExp: "logaddexp",
    Log1p: "log1p",
    Relu: "relu",
    Maximum: "max",
    Minimum: "min",
    sympy.Max: "max",
    sympy.Min: "min",
}
_RELATION_WORDS = {">": "gt", "<": "lt", ">=": "ge", "<=": "le", "==": "eq", "!=": "ne"}
_NUMBER_WORDS = {
    sympy.S.Zero: "zero",
    sympy.S.Half: "half",
    sympy.S.One: "one",
    sympy.Integer(2): "two",
    sympy.Integer(3): "three",
}
_POWER_WORDS = {2: "sq", 3: "cubed"}


# Constants ----------------------------------------------------------------------------------------------------
def _base_name(base: sympy.Expr) -> str | None:
    if base.is_Integer and base > 1:
        return str(base)
    if base == sympy.pi:
        return "pi"
    if base == sympy.E:
        return "e"
    if isinstance(base, sympy.log) and base.args[0].is_Integer and base.args[0] > 1:
        return f"ln{base.args[0]}"
    return None


def constant_parts(value: sympy.Expr) -> tuple[sympy.Expr, str, sympy.Expr] | None:
    """``(coefficient, name, named)`` with ``value == coefficient * named`` for a nameable constant, else None."""
    if not value.is_number or value.is_Rational or value.is_Float or not value.is_real or not value.is_finite:
        return None
    coefficient, rest = value.as_coeff_Mul()
    if not coefficient.is_Rational or rest.is_Rational:
        return None
    powers = dict(rest.as_powers_dict())
    # sympy writes 1 / sqrt(2) as sqrt(2) / 2: the 2 goes back under the root, so its name says what it is.
    ((base, exponent),) = powers.items() if len(powers) == 1 else ((None, None),)
    if base is not None and base.is_Integer and exponent == sympy.S.Half and coefficient.q % base == 0:
        powers[base], coefficient = -sympy.S.Half, coefficient * base
    if len(powers) > 3:
        return None
    roots: dict[int, list[str]] = {1: [], -1: []}
    plain: dict[int, list[str]] = {1: [], -1: []}
    for base, exponent in sorted(powers.items(), key=lambda item: sympy.default_sort_key(item[0])):
        name = _base_name(base)
        if name is None or not exponent.is_Rational:
            return None
        sign = 1 if exponent > 0 else -1
        magnitude = abs(exponent)
        if magnitude == sympy.S.Half:
            roots[sign].append(name)
        elif magnitude.is_Integer and magnitude == 1:
            plain[sign].append(name)
        elif magnitude.is_Integer and int(magnitude) in _POWER_WORDS:
            plain[sign].append(f"{name}_{_POWER_WORDS[int(magnitude)]}")
        else:
            return None
    if not (plain[1] or plain[-1]):
        name = "sqrt_" + "_".join(roots[1]) + ("_over_" + "_".join(roots[-1]) if roots[-1] else "")
        if not roots[1]:
            name = "inv_sqrt_" + "_".join(roots[-1])
    else:
        numerator = plain[1] + (["sqrt_" + "_".join(roots[1])] if roots[1] else [])
        denominator = plain[-1] + (["sqrt_" + "_".join(roots[-1])] if roots[-1] else [])
        name = "_".join(numerator) + ("_over_" + "_".join(denominator) if denominator else "")
        if not numerator:
            name = "inv_" + "_".join(denominator)
    named = sympy.Mul(*(base**exponent for base, exponent in powers.items()))
    return coefficient, name, named


class ConstantNames:
    """Named constants found in expressions: ``rewrite`` replaces them by symbols, ``definitions`` lists them."""

    def __init__(self, taken: set[str]):
        self.taken = taken
        self.symbols: dict[sympy.Expr, sympy.Symbol] = {}
        self.values: dict[sympy.Symbol, sympy.Expr] = {}

    def _symbol(self, named: sympy.Expr, name: str) -> sympy.Symbol:
        if named not in self.symbols:
            symbol = sympy.Symbol(unique_name(name, self.taken), real=True)
            self.symbols[named], self.values[symbol] = symbol, named
        return self.symbols[named]

    def _constant(self, value: sympy.Expr) -> sympy.Expr | None:
        parts = constant_parts(value)
        if parts is None:
            return None
        coefficient, name, named = parts
        return coefficient * self._symbol(named, name)

    def rewrite(self, expr: sympy.Expr) -> sympy.Expr:
        if not isinstance(expr, sympy.Basic) or not expr.args:
            return expr
        if isinstance(expr, sympy.Expr) and expr.is_number:
            return self._constant(expr) or expr
        if isinstance(expr, sympy.Pow):  # a constant exponent decides how the power prints: it stays a number
            base = self.rewrite(expr.base)
            return expr if base == expr.base else sympy.Pow(base, expr.exp)
        if isinstance(expr, sympy.Mul):
            numbers = sympy.Mul(*(arg for arg in expr.args if arg.is_number))
            named = self._constant(numbers)
            rest = [arg for arg in expr.args if not arg.is_number]
            rewritten = [self.rewrite(arg) for arg in rest]
            if named is None and rewritten == rest:
                return expr
            return sympy.Mul(named if named is not None else numbers, *rewritten)
        args = [self.rewrite(arg) for arg in expr.args]
        # Rebuilt only where a constant was named: sympy's constructors would re-distribute 0.7 * (exp(y) - 1).
        return expr if args == list(expr.args) else expr.func(*args)


def renamed_name(name: str, mapping: dict[str, str]) -> str:
    """``name`` renamed by ``mapping``; a gradient's name ``grad_{name}`` follows its name."""
    if name in mapping:
        return mapping[name]
    if name.startswith("grad_") and name[len("grad_") :] in mapping:
        return f"grad_{mapping[name[len('grad_') :]]}"
    return name


# Temporaries --------------------------------------------------------------------------------------------------
def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with the smallest number that makes it free; the result is added to ``taken``."""

    def free(candidate: str) -> bool:
        return (
            candidate not in taken
            and candidate not in RESERVED
            and not keyword.iskeyword(candidate)
            and not candidate.endswith(_RESERVED_SUFFIXES)
            and not candidate.startswith("HAS_")
        )

    candidate, index = name, 1
    while not free(candidate):
        candidate, index = f"{name}{index}", index + 1
    taken.add(candidate)
    return candidate


class TemporaryNames:
    """Role names for the temporaries of one kernel (see the module docstring)."""

    def __init__(self, taken: set[str]):
        self.taken = taken
        self.definitions: dict[sympy.Symbol, sympy.Expr] = {}

    def name(self, expr: sympy.Expr) -> sympy.Symbol:
        words = self._words(expr)
        text = "_".join(words) if words else ""
        family = _family(expr)
        if family is not None:
            text = family
        elif not words or len(words) > MAX_WORDS or len(text) > MAX_CHARS:
            text = self._fallback(expr)
        symbol = sympy.Symbol(unique_name(text, self.taken), real=True)
        self.definitions[symbol] = expr
        return symbol

    def _fallback(self, expr: sympy.Expr) -> str:
        head = self._head(expr)
        if head is not None:
            return f"{head}_inner"
        if isinstance(expr, sympy.core.relational.Relational):
            return "mask"
        if isinstance(expr, (sympy.Mul, sympy.Add)):
            leading = _leading(expr)
            words = self._words(leading)
            if words and len(words) <= 2:
                return "_".join(words) + "_term"
            if self._head(leading) is not None:
                return f"{self._head(leading)}_term"
        return "term"

    def _head(self, expr: sympy.Expr) -> str | None:
        if isinstance(expr, sympy.Pow):
            return {-1: "inv", sympy.S.Half: "sqrt", -sympy.S.Half: "rsqrt"}.get(expr.exp)
        for kind, word in FUNCTION_WORDS.items():
            if isinstance(expr, kind):
                return word
        if isinstance(expr, sympy.Piecewise):
            return "where"
        return None

    def _words(self, expr: sympy.Expr) -> list[str] | None:
        if isinstance(expr, sympy.Symbol):
            return [expr.name]
        if isinstance(expr, sympy.Expr) and expr.is_number:
            return _number_words(expr) or None
        derivative = self._derivative_of(expr)
        if derivative is not None:
            return [f"d{derivative.name}"]
        if isinstance(expr, CastToInput):
            return self._words(expr.args[0])
        if isinstance(expr, sympy.Mul):
            coefficient, factors = expr.as_coeff_mul()
            words = ["neg"] if coefficient == -1 else [] if coefficient == 1 else _number_words(coefficient)
            # sigmoid's derivative t * (1 - t) spread over the product's factors is one word, after the others.
            derivatives = [t for t in self._sigmoids() if t in factors and 1 - t in factors]
            factors = [f for f in factors if not any(f in (t, 1 - t) for t in derivatives)]
            # Divisors last, after "over": sin(u) / alpha is sin_u_over_alpha (1 / n_cols stays inv_n_cols).
            divisors = [f for f in factors if isinstance(f, sympy.Pow) and f.exp == -1]
            for factor in [f for f in factors if f not in divisors] or divisors:
                inner = self._words(factor)
                if inner is None:
                    return None
                words += inner
            if len(divisors) < len(factors):
                for divisor in divisors:
                    inner = self._words(divisor.base)
                    if inner is None:
                        return None
                    words += ["over", *inner]
            return words + [f"d{t.name}" for t in derivatives]
        if isinstance(expr, sympy.Add):
            terms = sorted(expr.as_ordered_terms(), key=lambda term: term.could_extract_minus_sign())
            words: list[str] = []
            for index, term in enumerate(terms):
                negative = term.could_extract_minus_sign()
                inner = self._words(-term if negative else term)
                if inner is None:
                    return None
                words += ([] if index == 0 else ["minus" if negative else "plus"]) + inner
            return words if not terms[0].could_extract_minus_sign() else ["neg", *words]
        if isinstance(expr, sympy.Pow):
            base = self._words(expr.base)
            if base is None:
                return None
            if expr.exp == -1:
                return ["inv", *base]
            if expr.exp in (sympy.S.Half, -sympy.S.Half):
                return ["sqrt" if expr.exp > 0 else "rsqrt", *base]
            if expr.exp.is_Integer and int(expr.exp) in _POWER_WORDS:
                return [*base, _POWER_WORDS[int(expr.exp)]]
            return None
        if isinstance(expr, sympy.core.relational.Relational):
            lhs, rhs = self._words(expr.lhs), self._words(expr.rhs)
            return None if lhs is None or rhs is None else [*lhs, _RELATION_WORDS[expr.rel_op], *rhs]
        head = self._head(expr)
        if head is not None and not isinstance(expr, sympy.Piecewise):
            words = [head]
            for arg in expr.args:
                inner = self._words(arg)
                if inner is None:
                    return None
                words += inner
            return words
        return None

    def _sigmoids(self) -> list[sympy.Symbol]:
        return [symbol for symbol, definition in self.definitions.items() if isinstance(definition, Sigmoid)]

    def _derivative_of(self, expr: sympy.Expr) -> sympy.Symbol | None:
        """The temporary ``t`` when ``expr`` is its function's derivative written with it: ``1 - t ** 2`` for
        ``t = tanh(u)``, ``t * (1 - t)`` for ``t = sigmoid(u)``."""
        for symbol, definition in self.definitions.items():
            if expr.free_symbols != {symbol} or sympy.count_ops(expr) > 6:
                continue
            if isinstance(definition, sympy.tanh) and sympy.expand(expr - (1 - symbol**2)) == 0:
                return symbol
            if isinstance(definition, Sigmoid) and sympy.expand(expr - symbol * (1 - symbol)) == 0:
                return symbol
        return None


def hoist(
    exprs: list[sympy.Expr], taken: set[str], name_constants: bool = True
) -> tuple[dict[str, str], list[tuple], list[sympy.Expr]]:
    """Named constants (unless not ``name_constants``) and common subexpressions of ``exprs`` (``sympy.cse`` over
    all of them jointly): the constants as ``{name: literal}``, the temporaries as ``(symbol, value)`` in order (each
    after the ones it reads), and ``exprs`` written with both. New names are added to ``taken``.

    A ``KernelForm`` (a value computed by a cheaper form, ``functions.py``) becomes a temporary of its expanded form,
    named after the value it stands for, and the pieces of that form are shared with the rest (the ``exp(x)`` of
    mish's ``tanh(softplus(x))`` with its ``sigmoid(x)``).

    A stop-gradient has done its work once the gradients are derived: from here on it is its value, so that
    ``norm + detach(clamp(norm) - norm)`` is computed as the ``clamp(norm)`` it is."""
    exprs = [expr.replace(lambda node: isinstance(node, Detached), lambda node: node.args[0]) for expr in exprs]
    forms = sorted(
        {node for expr in exprs for node in sympy.preorder_traversal(expr) if isinstance(node, KernelForm)},
        key=sympy.default_sort_key,
    )
    stand_ins = {form: sympy.Symbol(f"_form{index}", real=True) for index, form in enumerate(forms)}
    expansions = [form.kernel_form().xreplace(stand_ins) for form in forms]
    constants = ConstantNames(taken)
    together = [expr.xreplace(stand_ins) for expr in exprs] + expansions
    rewritten = [constants.rewrite(expr) for expr in together] if name_constants else together
    placeholders = sympy.numbered_symbols("_cse", real=True)
    replacements, reduced = sympy.cse(rewritten, symbols=placeholders, order="canonical")
    temporaries = TemporaryNames(taken)
    definitions = []
    renames: dict[sympy.Symbol, sympy.Expr] = {}
    for placeholder, expr in replacements:
        expr = expr.xreplace(renames)
        if expr.is_number:  # a folded constant is a literal, not a temporary
            renames[placeholder] = expr
            continue
        renames[placeholder] = temporaries.name(expr)
        definitions.append((renames[placeholder], expr))
    reduced = [expr.xreplace(renames) for expr in reduced]
    named_forms = {stand_in: temporaries.name(form) for form, stand_in in stand_ins.items()}
    for index, stand_in in enumerate(stand_ins.values()):
        definitions.append((named_forms[stand_in], reduced[len(exprs) + index].xreplace(named_forms)))
    definitions = _in_dependency_order([(symbol, value.xreplace(named_forms)) for symbol, value in definitions])
    literals = {symbol.name: float_literal(value) for symbol, value in constants.values.items()}
    return literals, definitions, [expr.xreplace(named_forms) for expr in reduced[: len(exprs)]]


def _in_dependency_order(definitions: list[tuple]) -> list[tuple]:
    """``(symbol, value)`` definitions reordered so that each comes after those it reads (otherwise as given)."""
    defined = {symbol for symbol, _ in definitions}
    ordered, done, pending = [], set(), list(definitions)
    while pending:
        ready = next(d for d in pending if not (d[1].free_symbols & defined) - done)
        ordered.append(ready)
        done.add(ready[0])
        pending.remove(ready)
    return ordered


def constant_lines(constants: dict[str, str]) -> list[str]:
    """The statements that define named constants, sorted by name."""
    return [f"{name} = {literal}" for name, literal in sorted(constants.items())]


def _family(expr: sympy.Expr) -> str | None:
    """The common stem of the names a sum or function reads when they all share one (``lse`` for
    ``lse_max + log(lse_sum)``): what kernelgen calls a row statistic's pieces, read as the value they make."""
    if not isinstance(expr, (sympy.Add, sympy.Function)):
        return None
    names = sorted(symbol.name for symbol in expr.free_symbols)
    if len(names) < 2:
        return None
    stem = names[0]
    for name in names[1:]:
        while stem and not name.startswith(stem + "_"):
            stem = stem.rpartition("_")[0]
    # A function's word would read as its call (``log = log_p - log_q`` of two inputs is no logarithm).
    if not stem or stem == "grad" or stem in FUNCTION_WORDS.values():
        return None
    return stem if all(name.startswith(stem + "_") for name in names) else None


def _number_words(number: sympy.Expr) -> list[str]:
    """A small number's word (``half``), nothing for others: a product is named after what it multiplies."""
    return [_NUMBER_WORDS[number]] if number in _NUMBER_WORDS else []


def _leading(expr: sympy.Expr) -> sympy.Expr:
    """The factor or term a product or sum is printed with first."""
    if isinstance(expr, sympy.Mul):
        factors = [f for f in expr.as_ordered_factors() if not f.is_number]
        multiplied = [f for f in factors if not (isinstance(f, sympy.Pow) and f.exp == -1)]
        return (multiplied or factors or [expr])[0]
    return expr.as_ordered_terms()[0]


__all__ = [
    "FUNCTION_WORDS",
    "MAX_CHARS",
    "MAX_WORDS",
    "RESERVED",
    "ConstantNames",
    "TemporaryNames",
    "constant_lines",
    "constant_parts",
    "hoist",
    "renamed_name",
    "unique_name",
]
