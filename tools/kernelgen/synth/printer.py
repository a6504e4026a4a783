"""Print sympy expressions as Triton (``tl.*``) expressions, and as readable formulas.

``TritonPrinter`` conventions (everything is computed in fp32: the templates upcast loads, so no casts here):

- numbers, including constant subexpressions such as ``sqrt(2 / pi)``, become float literals (``2.0``,
  ``0.7978845608028654``: the repr of the Python float, enough digits for fp32); the Triton statement builders
  first give known constants a name (``sqrt_2_over_pi``, ``naming.py``), which prints as a symbol;
- powers: exponents 2..8 as repeated multiplication, negative integers as divisions (``1.0 / x``), ``0.5`` as
  ``tl.sqrt``, ``-0.5`` as ``tl.rsqrt`` (half-integers combine the two), any other constant as
  ``tl.exp2(p * tl.log2(x))`` (valid for ``x > 0`` only, like a fractional power in torch); an exponent known
  only at run time (a hyper-parameter, a tensor) as ``pow(x, p)``, with torch's signs and ``x ** 0 == 1``;
- ``tanh(u)`` as ``tanh_from_exp(u)``, runtime powers as ``pow``: jit helpers of the target's
  ``liger_kernel.ops.utils``, which generated files import (``tanh_from_exp``: one formula of core ``tl`` ops,
  compiled and interpreted; ``pow``: libdevice's when compiled, a core-op formula under the Triton interpreter,
  where libdevice does not exist);
- ``softplus``/``logsigmoid`` in their overflow-free forms ``max(u, 0) + log(1 + exp(-|u|))``, and any ``log(1 + v)``
  with ``v`` provably in [0, 1] (``functions.in_unit_interval``: that ``exp(-|u|)``, a sigmoid), as the utils
  ``log1p_unit(v)``: a polynomial of core ops, within 2 ulps of ``log1p``, where ``tl.log`` is a polynomial with a
  range reduction and ``1 + v`` would round a small ``v``'s digits away (compiled for sm_90, logsigmoid's forward
  issues 19.2 instructions an element with it, 34.5 with ``tl.log(1 + e)``: ``benchmark/scripts/sass_counts.py``; on
  an H200 at 16384 x 14336 bf16 it ran in 222.0 us instead of 289.2);
- ``TritonLibdevicePrinter`` prints tanh as the utils ``tanh``, ``log(1 + v)`` (``Log1p``, which
  ``derive.print_elementwise`` makes of it for this printer) as the utils ``log1p`` (libdevice's when compiled),
  softplus's ``log(1 + exp(-|u|))`` included: for the kernels the profile asks it of
  (``tiling.forward_math``/``backward_math``: ``libdevice``) and forwards whose only transcendental is tanh;
- ``Piecewise`` as nested ``tl.where``; comparisons as ``x > 0.0``; ``&``/``|`` between conditions.

Anything without a rule raises instead of printing something that is not Triton.

``TileLangPrinter`` prints the same expressions as TileLang (``T.*``, ``import tilelang.language as T``) for the
body of a ``T.Parallel`` loop over fp32 scalars: ``T.if_then_else`` for selections, ``T.max``/``T.min``,
``T.And``/``T.Or``/``T.Not`` for conditions, CUDA's own ``T.tanh`` and ``T.pow`` (powf keeps torch's signs and
``x ** 0 == 1``, so no helpers), and rounding to the inputs' dtype as ``T.cast(T.cast(u, input_dtype), "float32")``.
Python float literals become fp32 constants next to fp32 values, so literals print alike in both languages.
"""

import contextlib
import contextvars
import re

import sympy

from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

# Integer powers up to this exponent are printed as products; beyond it as exp2/log2 of |x| with the sign fixed.
_MAX_MULTIPLIED_POWER = 8


def float_literal(value) -> str:
    """A float literal for a numeric sympy expression: signed infinities (torch's gradient of ``0 ** p`` by a negative
    ``p``) as ``float("inf")``; raises for complex, undefined (``zoo``, ``nan``) values."""
    if value in (sympy.oo, -sympy.oo):
        return 'float("inf")' if value == sympy.oo else 'float("-inf")'
    number = sympy.N(value, 30)
    if not number.is_real or not number.is_finite:
        raise ValueError(f"constant {value} is not a finite real number")
    return repr(float(number))


# jit helpers the printed Triton statements call, imported from the target's ``liger_kernel.ops.utils``
# (``kernel_helpers.py``).
TANH_HELPER = "tanh_from_exp"
# libdevice's functions when compiled (core-op formulas under the interpreter), see TritonLibdevicePrinter.
LIBDEVICE_TANH_HELPER = "tanh"
LIBDEVICE_LOG1P_HELPER = "log1p"
# log(1 + v) for v in [0, 1], core ops compiled and interpreted alike (TritonPrinter.unit_log1p_helper).
UNIT_LOG1P_HELPER = "log1p_unit"
# exp(v) - 1 and 1 - erf(v) keeping a small result's digits: libdevice's compiled, core-op formulas interpreted.
EXPM1_HELPER = "expm1"
ERFC_HELPER = "erfc"
POW_HELPER = "pow"
INPUT_DTYPE = "input_dtype"
_HELPERS = (
    TANH_HELPER,
    LIBDEVICE_TANH_HELPER,
    LIBDEVICE_LOG1P_HELPER,
    UNIT_LOG1P_HELPER,
    EXPM1_HELPER,
    ERFC_HELPER,
    POW_HELPER,
)
_HELPER_CALL = re.compile(rf"(?<![\w.])({'|'.join(_HELPERS)})\(")


def jit_helpers_called(statements) -> list[str]:
    """The jit helpers ``statements`` (printed or hand-written Triton lines) call, sorted."""
    return sorted({match for line in statements for match in _HELPER_CALL.findall(line)})


class _ConditionPrinting:
    """Printing shared by both printers: ``Piecewise`` as nested ``where_name`` calls, comparisons and ``&``/``|``.

    Python, Triton and ``parse_formula`` spell sympy's six relations (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``)
    alike, and arithmetic binds tighter than comparisons, so neither side needs parentheses.
    """

    where_name = "where"

    def _print_Piecewise(self, expr):
        *branches, (otherwise, _) = expr.args
        text = self._print(otherwise)
        for value, condition in reversed(branches):
            text = f"{self.where_name}({self._print(condition)}, {self._print(value)}, {text})"
        return text

    def _print_Relational(self, expr):
        return f"{self._print(expr.lhs)} {expr.rel_op} {self._print(expr.rhs)}"

    def _print_ITE(self, expr):
        # A condition chosen by a condition: sympy writes one when a comparison's side is piecewise (the minimum
        # of a clipped ratio, differentiated).
        condition, then, otherwise = (self._print(arg) for arg in expr.args)
        return f"{self.where_name}({condition}, {then}, {otherwise})"

    def _print_And(self, expr):
        return " & ".join(f"({self._print(arg)})" for arg in expr.args)

    def _print_Or(self, expr):
        return " | ".join(f"({self._print(arg)})" for arg in expr.args)


ROW_LENGTH = "n_cols"  # the row program's row length, an integer argument of every row kernel (rows.N_COLS)

# Symbols that hold integers in the kernel being printed (a loss's column index and class indices).
_INTEGER_NAMES: contextvars.ContextVar[frozenset] = contextvars.ContextVar("integer_names", default=frozenset())


@contextlib.contextmanager
def integer_symbols(names):
    """Inside: a comparison of these symbols with an integer constant prints the constant as an int (``target >=
    0``), as integer comparisons are; the Triton interpreter cannot combine a scalar int compared with a float."""
    token = _INTEGER_NAMES.set(frozenset(names))
    try:
        yield
    finally:
        _INTEGER_NAMES.reset(token)


# Symbols the same for every element of the kernel being printed (scalar parameters, hyper-parameters).
_UNIFORM_NAMES: contextvars.ContextVar[frozenset] = contextvars.ContextVar("uniform_names", default=frozenset())


@contextlib.contextmanager
def uniform_symbols(names):
    """Inside: a condition on these symbols alone is a scalar, which ``TritonPrinter`` combines with a tile's
    conditions by ``tl.where`` (the Triton interpreter cannot ``&`` a scalar condition with a tile's)."""
    token = _UNIFORM_NAMES.set(frozenset(names))
    try:
        yield
    finally:
        _UNIFORM_NAMES.reset(token)


# The written constants of the expressions being printed (the reference's ``0.044715``): a derivative's coefficient
# that is a small whole multiple of one prints as that multiple (``3 * 0.044715``, not ``0.134145``).
_WRITTEN_CONSTANTS: contextvars.ContextVar[frozenset] = contextvars.ContextVar("written_constants", default=frozenset())
# Multiples a coefficient is tried as, and the significant digits a constant needs to count as written (0.5 does not:
# 1.5 reads better than 3 * 0.5).
_MULTIPLES = range(2, 13)
_WRITTEN_DIGITS = 3


def written_constants(exprs) -> frozenset:
    """The exact decimals of ``exprs`` with at least ``_WRITTEN_DIGITS`` significant digits (numbers a reference
    wrote, such as gelu's 0.044715, kept exact by ``rules.to_sympy_number``)."""
    found = set()
    for expr in exprs:
        for number in expr.atoms(sympy.Rational):
            q = number.q
            while q % 2 == 0:
                q //= 2
            while q % 5 == 0:
                q //= 5
            digits = len(str(abs(number.p)).strip("0"))
            if number.q > 1 and q == 1 and digits >= _WRITTEN_DIGITS:
                found.add(abs(number))
    return frozenset(found)


@contextlib.contextmanager
def printing_written_constants(constants):
    """Inside: a coefficient that is 2 to 12 times one of ``constants`` prints as that product."""
    token = _WRITTEN_CONSTANTS.set(frozenset(constants))
    try:
        yield
    finally:
        _WRITTEN_CONSTANTS.reset(token)


def _coefficient_literal(coefficient) -> str:
    """A positive coefficient as a literal, or as ``k * constant`` of a written constant (``written_constants``)."""
    constants = _WRITTEN_CONSTANTS.get()
    if coefficient.is_Rational and coefficient not in constants:
        for multiple in _MULTIPLES:
            if coefficient / multiple in constants:
                return f"{multiple} * {float_literal(coefficient / multiple)}"
    return float_literal(coefficient)


# The functions a kernel printer names by role (``_KernelPrinter.names``).
_ROLES = ("exp", "log", "sin", "cos", "erf", "abs", "sigmoid", "sqrt", "rsqrt", "exp2", "log2", "max", "min", "floor")


def _spellings(namespace: str, **exceptions: str) -> dict[str, str]:
    """Each role as ``namespace.role``, except where the language names it otherwise."""
    return {role: exceptions.get(role, f"{namespace}.{role}") for role in _ROLES}


class _KernelPrinter(_ConditionPrinting, StrPrinter):
    """sympy expression -> an fp32 expression of a kernel language: the structure both languages share (constant
    folding, sums, products and powers as multiplications), with each language's spelling of its functions in
    ``names`` and its own forms of what the two write differently (the ``_print_*`` methods of the subclasses)."""

    printmethod = "_kernelcode"  # never defined: our classes' ``_sympystr`` must not leak into kernels
    language = ""
    named_constants = False  # whether statement builders name known constants (``naming.py``) for this language
    prints_log1p = False  # whether every ``log(1 + v)`` is given as ``Log1p(v)`` to print with a log1p of its own
    prints_expm1_erfc = False  # whether ``exp(v) - 1`` and ``1 - erf(v)`` are given as ``Expm1(v)`` and ``Erfc(v)``
    # whether ``log(1 + v)`` with ``v`` in [0, 1] is given as ``Log1pOfUnit(v)``, printed with UNIT_LOG1P_HELPER
    prints_unit_log1p = False
    # role -> the language's function: exp, log, sin, cos, erf, abs, sigmoid, sqrt, rsqrt, exp2, log2, max, min.
    names: dict[str, str] = {}

    def _call(self, role: str, *args) -> str:
        return f"{self.names[role]}({', '.join(self._function_argument(arg) for arg in args)})"

    def _function_argument(self, arg) -> str:
        """A math function's argument; the row length alone is an integer in the kernel (``sqrt(n_cols)``), which
        the languages' float functions refuse: it goes in as a float."""
        if isinstance(arg, sympy.Symbol) and arg.name == ROW_LENGTH:
            return f"1.0 * {arg.name}"
        return self._print(arg)

    def _print_Relational(self, expr):
        integers = _INTEGER_NAMES.get()
        free = expr.lhs.free_symbols | expr.rhs.free_symbols
        if integers and free and {s.name for s in free} <= integers:
            sides = [str(int(side)) if side.is_Integer else self._print(side) for side in (expr.lhs, expr.rhs)]
            return f"{sides[0]} {expr.rel_op} {sides[1]}"
        return super()._print_Relational(expr)

    def _print(self, expr, **kwargs):
        # Fold every constant subexpression (sqrt(2), pi, exp(-1), sigmoid(3)...) into one literal.
        if isinstance(expr, sympy.Expr) and expr.is_number:
            return float_literal(expr)
        return super()._print(expr, **kwargs)

    def _print_Basic(self, expr):
        raise ValueError(f"no {self.language} printing rule for {type(expr).__name__}: {expr}")

    _print_Function = _print_Basic

    def _print_Detached(self, expr):  # a stop-gradient: the value itself, bracketed as the one factor it is
        return self.parenthesize(expr.args[0], PRECEDENCE["Atom"])

    # sympy looks a Function subclass's printing up by its own class name only (not its bases').
    def _print_TanhOfLog1p(self, expr):
        return self._print(expr.kernel_form())

    _print_SigmoidOfLog = _print_TanhOfLog1p

    def _print_Symbol(self, expr):
        return expr.name

    def _print_Add(self, expr, order=None):
        terms = expr.as_ordered_terms()
        text = ""
        for index, term in enumerate(terms):
            negative = term.could_extract_minus_sign()
            body = self.parenthesize(-term if negative else term, PRECEDENCE["Add"])
            if index == 0:
                text = f"-{self.parenthesize(-term, PRECEDENCE['Mul'])}" if negative else body
            else:
                text += f" - {body}" if negative else f" + {body}"
        return text

    def _print_Mul(self, expr):
        coefficient = sympy.S.One
        numerator: list[str] = []
        denominator: list[str] = []
        for factor in expr.as_ordered_factors():
            if factor.is_number:
                coefficient *= factor
                continue
            base, exponent = factor.as_base_exp()
            if exponent.is_Rational and exponent.is_negative and exponent.q in (1, 2):
                # x**-n and x**-(n + 1/2): divide by x**n (and multiply by rsqrt) instead of printing 1.0 / ...
                whole = -exponent if exponent.q == 1 else -exponent - sympy.S.Half
                if exponent.q == 2:
                    numerator.append(self._call("rsqrt", base))
                if whole:
                    denominator.append(self._divisor(base, int(whole)))
                continue
            numerator.append(self.parenthesize(factor, PRECEDENCE["Mul"]))
        sign = ""
        if coefficient.is_negative:
            sign, coefficient = "-", -coefficient
        if coefficient != 1 or not numerator:
            numerator.insert(0, _coefficient_literal(coefficient))
        text = sign + " * ".join(numerator)
        for divisor in denominator:
            text += f" / {divisor}"
        return text

    def _print_Pow(self, expr):
        base, exponent = expr.as_base_exp()
        if not exponent.is_number:
            return self._runtime_power(base, exponent)
        if exponent == sympy.S.Half:
            return self._call("sqrt", base)
        if exponent == -sympy.S.Half:
            return self._call("rsqrt", base)
        if exponent.is_Integer:
            if exponent > 0:
                return self._integer_power(base, int(exponent), atomic=False)
            return f"1.0 / {self._divisor(base, -int(exponent))}"
        if exponent.is_Rational and exponent.q == 2 and abs(exponent) <= _MAX_MULTIPLIED_POWER:
            root = self._call("sqrt" if exponent > 0 else "rsqrt", base)
            whole = int(abs(exponent) - sympy.S.Half)
            power = self._integer_power(base, whole, atomic=True)
            return f"{root} * {power}" if exponent > 0 else f"{root} / {power}"
        return self._constant_power(base, exponent)

    def reciprocal(self, base) -> str:
        """``1 / base``, as statement builders name it (``inv_softmax_sum = 1.0 / softmax_sum``)."""
        return f"1.0 / {self._divisor(base, 1)}"

    def _divisor(self, base, n: int) -> str:
        """``base ** n`` as a divisor (``TritonPrinter`` casts some)."""
        return self._integer_power(base, n, atomic=True)

    def _runtime_power(self, base, exponent) -> str:
        """``base ** exponent`` for an exponent known only when the kernel runs (a hyper-parameter, a tensor)."""
        raise NotImplementedError

    def _constant_power(self, base, exponent) -> str:
        """``base ** exponent`` for a constant exponent that is neither an integer nor a small half-integer."""
        raise NotImplementedError

    def _large_integer_power(self, base, n: int) -> str:
        """``base ** n`` for an integer beyond ``_MAX_MULTIPLIED_POWER`` (signs as in torch)."""
        raise NotImplementedError

    def _integer_power(self, base, n: int, atomic: bool) -> str:
        """``base ** n`` for a positive integer n; ``atomic`` wraps products in parentheses (for ``a / (x * x)``)."""
        if n == 1:
            return self.parenthesize(base, PRECEDENCE["Pow"]) if atomic else self._print(base)
        if n > _MAX_MULTIPLIED_POWER:
            text = self._large_integer_power(base, n)
            return f"({text})" if atomic else text
        factor = self.parenthesize(base, PRECEDENCE["Pow"])
        text = " * ".join([factor] * n)
        return f"({text})" if atomic else text

    def _print_exp(self, expr):
        return self._call("exp", expr.args[0])

    def _print_log(self, expr):
        return self._call("log", expr.args[0])

    def _print_sin(self, expr):
        return self._call("sin", expr.args[0])

    def _print_cos(self, expr):
        return self._call("cos", expr.args[0])

    def _print_erf(self, expr):
        return self._call("erf", expr.args[0])

    def _print_Abs(self, expr):
        arg = expr.args[0]
        if isinstance(arg, sympy.Pow) and not arg.exp.is_Integer:
            # sympy writes |x| ** p as |x ** p|, which is NaN for x < 0 and a fractional power: print |x| ** p.
            return self._print(sympy.Pow(sympy.Abs(arg.base), arg.exp, evaluate=False))
        return self._call("abs", arg)

    def _print_sign(self, expr):
        x = self._print(expr.args[0])
        where = self.where_name
        return f"{where}({x} > 0.0, 1.0, {where}({x} < 0.0, -1.0, 0.0))"

    def _print_Root(self, expr):
        return self._print(expr.as_builtin())

    def _print_Sigmoid(self, expr):
        return self._call("sigmoid", expr.args[0])

    def _print_Softplus(self, expr):
        u = expr.args[0]
        return f"({self.names['max']}({self._print(u)}, 0.0) + {self._log_one_plus_exp_minus_abs(u)})"

    def _print_LogSigmoid(self, expr):
        u = expr.args[0]
        return f"({self.names['min']}({self._print(u)}, 0.0) - {self._log_one_plus_exp_minus_abs(u)})"

    def _print_LogAddExp(self, expr):
        a, b = expr.args
        return f"({self._call('max', a, b)} + {self._log_one_plus_exp_minus_abs(a - b)})"

    def _log_one_plus_exp_minus_abs(self, u) -> str:
        """``log(1 + exp(-|u|))``, the overflow-free part of softplus, logsigmoid and logaddexp."""
        names = self.names
        return f"{names['log']}(1.0 + {names['exp']}(-{names['abs']}({self._print(u)})))"

    def _print_Relu(self, expr):
        return f"{self.names['max']}({self._print(expr.args[0])}, 0.0)"

    def _print_Floor(self, expr):
        return self._call("floor", expr.args[0])

    def _print_Sinc(self, expr):
        return self._print(expr.as_builtin())

    def _print_Maximum(self, expr):
        return self._call("max", *expr.args)

    def _print_Minimum(self, expr):
        return self._call("min", *expr.args)

    def _print_Max(self, expr):
        text = self._print(expr.args[0])
        for arg in expr.args[1:]:
            text = f"{self.names['max']}({text}, {self._print(arg)})"
        return text

    def _print_Min(self, expr):
        text = self._print(expr.args[0])
        for arg in expr.args[1:]:
            text = f"{self.names['min']}({text}, {self._print(arg)})"
        return text

    def _print_Piecewise(self, expr):
        if expr.args[-1].cond is not sympy.true:
            raise ValueError(f"Piecewise without a default branch has no value everywhere: {expr}")
        return super()._print_Piecewise(expr)

    def _print_BooleanTrue(self, expr):
        return "True"

    def _print_BooleanFalse(self, expr):
        return "False"

    def zeros_like(self, name: str) -> str:
        """A gradient that is identically zero, as a value the template can store in place of ``name``'s."""
        raise NotImplementedError


class TritonPrinter(_KernelPrinter):
    """sympy expression -> Triton expression over fp32 tensors (see the module docstring)."""

    language = "Triton"
    named_constants = True
    where_name = "tl.where"
    names = _spellings("tl", max="tl.maximum", min="tl.minimum")

    def _divisor(self, base, n: int) -> str:
        # A divisor made of the row length alone and able to vanish (an unbiased variance's ``n_cols - 1``) is cast
        # to a tensor: compiled Triton makes an integer argument equal to 1 a compile-time constant, so ``1.0 /
        # (n_cols - 1.0)`` would fold to a ZeroDivisionError while compiling instead of torch's inf at run time.
        names = {symbol.name for symbol in base.free_symbols}
        if names == {ROW_LENGTH} and not isinstance(base, sympy.Symbol):
            return f"tl.cast({self._integer_power(base, n, atomic=False)}, tl.float32)"
        return super()._divisor(base, n)

    def _runtime_power(self, base, exponent) -> str:
        return f"{POW_HELPER}({self._print(base)}, {self._print(exponent)})"

    def _print_And(self, expr):
        return self._combined(expr, "&", "{tile}, {scalar}, False")

    def _print_Or(self, expr):
        return self._combined(expr, "|", "{tile}, True, {scalar}")

    def _combined(self, expr, operator: str, where_arguments: str) -> str:
        """Conditions joined by ``operator``; a scalar one (on uniform symbols alone: ``p != 0`` of a scalar
        parameter) joins the tile's by ``tl.where`` instead, which compiles to the same select and which the Triton
        interpreter runs (its ``&`` of a scalar and a tile's condition raises)."""
        names = _UNIFORM_NAMES.get()
        scalar = [arg for arg in expr.args if arg.free_symbols and {s.name for s in arg.free_symbols} <= names]
        tile = [arg for arg in expr.args if arg not in scalar]
        if not scalar or not tile:
            return f" {operator} ".join(f"({self._print(arg)})" for arg in expr.args)
        text = f" {operator} ".join(f"({self._print(arg)})" for arg in tile)
        for condition in scalar:
            text = f"{self.where_name}({where_arguments.format(tile=text, scalar=self._print(condition))})"
        return text

    def _constant_power(self, base, exponent) -> str:
        return f"tl.exp2({self._print(exponent)} * tl.log2({self._print(base)}))"

    def _large_integer_power(self, base, n: int) -> str:
        printed = self._print(base)
        magnitude = f"tl.exp2({float(n)!r} * tl.log2(tl.abs({printed})))"
        # An odd power keeps the sign of the base, which the log of |base| dropped.
        return f"tl.where({printed} < 0.0, -1.0, 1.0) * {magnitude}" if n % 2 else magnitude

    tanh_helper = TANH_HELPER
    # log(1 + v) for v in [0, 1]: softplus's log(1 + exp(-|u|)) and the Log1pOfUnit nodes print_elementwise makes.
    unit_log1p_helper = UNIT_LOG1P_HELPER
    prints_unit_log1p = True
    # Any other log(1 + v), exp(v) - 1 and 1 - erf(v) by the utils' log1p, expm1 and erfc: written out, a small
    # result loses its digits to the 1 it is computed against (torch.log1p(1e-7) would be 1.19e-7, torch.erfc(4)
    # 0).
    prints_log1p = True
    prints_expm1_erfc = True

    def _print_Log1p(self, expr):
        return f"{LIBDEVICE_LOG1P_HELPER}({self._print(expr.args[0])})"

    def _print_Expm1(self, expr):
        return f"{EXPM1_HELPER}({self._print(expr.args[0])})"

    def _print_Erfc(self, expr):
        return f"{ERFC_HELPER}({self._print(expr.args[0])})"

    def _print_Log1pOfUnit(self, expr):
        return f"{self.unit_log1p_helper}({self._print(expr.args[0])})"

    def _log_one_plus_exp_minus_abs(self, u) -> str:
        return f"{self.unit_log1p_helper}(tl.exp(-tl.abs({self._print(u)})))"

    def _print_tanh(self, expr):
        # The utils helper, not 2 * sigmoid(2u) - 1, which would cancel to nothing near 0.
        return f"{self.tanh_helper}({self._print(expr.args[0])})"

    def _print_CastToInput(self, expr):
        # ``input_dtype`` is the first input's element type, defined by the templates of kernels that round.
        return f"({self._print(expr.args[0])}).to({INPUT_DTYPE}).to(tl.float32)"

    def _print_Not(self, expr):
        return f"~({self._print(expr.args[0])})"

    def zeros_like(self, name: str) -> str:
        return f"tl.zeros_like({name})"


class TritonLibdevicePrinter(TritonPrinter):
    """``TritonPrinter`` with libdevice's tanh and log1p (the utils ``tanh`` and ``log1p``: libdevice's when compiled,
    core-op formulas under the interpreter). They are exact to an ulp or two where the core-op forms are a few ulps
    off, and they take more registers: which is faster depends on the kernel, measured on an H200 at 16384 x 4096 /
    14336 bf16: geglu's forward 100.4 -> 97.8 and 328.4 -> 324.1 us with libdevice's tanh (torch.compile's 97.5 and
    324.9), so forwards whose only transcendental is tanh use it unless the profile says otherwise; mish's forward
    437 -> 455 us and dyt's backward 1.7x slower with it; the softplus gate's backward 588.5 -> 551.2 us with
    libdevice's log1p, mish's 574 -> 586. Hence a per-kernel, per-pass choice that ``tune`` sweeps
    (``tiling.forward_math``/``backward_math``)."""

    tanh_helper = LIBDEVICE_TANH_HELPER
    unit_log1p_helper = LIBDEVICE_LOG1P_HELPER


TritonPrinter.libdevice_printer_class = TritonLibdevicePrinter


class TileLangPrinter(_KernelPrinter):
    """sympy expression -> TileLang expression over fp32 scalars in a ``T.Parallel`` loop (module docstring)."""

    language = "TileLang"
    # Literals: a Python float bound to a local inside a T.Parallel body is not a plain fp32 constant there.
    named_constants = False
    where_name = "T.if_then_else"
    names = _spellings("T")

    def _runtime_power(self, base, exponent) -> str:
        return f"T.pow({self._print(base)}, {self._print(exponent)})"

    def _constant_power(self, base, exponent) -> str:
        # powf: NaN for a negative base and a fractional exponent, as torch.
        return f"T.pow({self._print(base)}, {float_literal(exponent)})"

    def _large_integer_power(self, base, n: int) -> str:
        # powf with an integral exponent keeps the sign of a negative base for odd n.
        return f"T.pow({self._print(base)}, {float(n)!r})"

    def _print_tanh(self, expr):
        return f"T.tanh({self._print(expr.args[0])})"

    def _print_CastToInput(self, expr):
        # ``input_dtype``: the inputs' dtype, an argument of every TileLang program builder.
        return f'T.cast(T.cast({self._print(expr.args[0])}, {INPUT_DTYPE}), "float32")'

    def _print_And(self, expr):
        return self._nested("T.And", expr.args)

    def _print_Or(self, expr):
        return self._nested("T.Or", expr.args)

    def _nested(self, function: str, args) -> str:
        text = self._print(args[0])
        for arg in args[1:]:
            text = f"{function}({text}, {self._print(arg)})"
        return text

    def _print_Not(self, expr):
        return f"T.Not({self._print(expr.args[0])})"

    def zeros_like(self, name: str) -> str:
        return "0.0"


class FormulaPrinter(_ConditionPrinting, StrPrinter):
    """Human-readable formulas in the canonical op names, parseable again by ``parse_formula``."""

    def _print_Abs(self, expr):
        return f"abs({self._print(expr.args[0])})"

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Pow(self, expr, rational=False):
        if expr.exp == -sympy.S.Half:
            return f"rsqrt({self._print(expr.base)})"
        return super()._print_Pow(expr, rational=rational)

    def _print_Take(self, expr):
        return f"take({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_Infinity(self, expr):
        return "inf"

    def _print_NegativeInfinity(self, expr):
        return "-inf"


# What a per-class value at a class index prints as on the host: a helper of the generated loss wrapper, which
# reads ``values[index]`` in fp32, 0 for an index outside the classes (an ignored row's) and 1 for values None.
TAKE_HELPER = "_take"
TAKE_HELPER_SOURCE = f"""def {TAKE_HELPER}(values, index):
    \"\"\"values[index] in fp32 for class indices, one per row: 0 where an index is no class (an ignored row's), 1
    everywhere when values is None (no class weights: every class weighs 1).\"\"\"
    if values is None:
        return torch.ones(index.shape, dtype=torch.float32, device=index.device)
    inside = (index >= 0) & (index < values.shape[0])
    return torch.where(inside, values[torch.where(inside, index, 0)].float(), 0.0)
"""


class TorchPrinter(FormulaPrinter):
    """Host-side torch expressions over tensors and Python numbers (a loss's row denominator); a per-class value at
    a class index calls ``TAKE_HELPER``."""

    where_name = "torch.where"

    def _print(self, expr, **kwargs):
        if isinstance(expr, sympy.Expr) and expr.is_number:
            return float_literal(expr)
        return super()._print(expr, **kwargs)

    def _print_Function(self, expr):
        return f"torch.{type(expr).__name__.lower()}({', '.join(self._print(arg) for arg in expr.args)})"

    def _print_Abs(self, expr):
        return f"torch.abs({self._print(expr.args[0])})"

    def _print_Detached(self, expr):
        return self.parenthesize(expr.args[0], PRECEDENCE["Atom"])

    def _print_Take(self, expr):
        return f"{TAKE_HELPER}({self._print(expr.args[0])}, {_IndexPrinting.of(TorchPrinter).doprint(expr.args[1])})"


class _IndexPrinting:
    """Integers as integers (``where(target < 0, 0, target)``): an index stays an integer tensor, where a float
    literal would promote it to float."""

    _classes: dict[type, type] = {}

    @classmethod
    def of(cls, printer: type):
        if printer not in cls._classes:
            cls._classes[printer] = type(f"Index{printer.__name__}", (cls, printer), {})
        return cls._classes[printer]()

    def _print(self, expr, **kwargs):
        if isinstance(expr, sympy.Integer):
            return str(int(expr))
        return super()._print(expr, **kwargs)


def print_triton_index(expr: sympy.Basic) -> str:
    """An integer expression (a class index) as Triton, integer constants kept integers."""
    return _IndexPrinting.of(TritonPrinter).doprint(expr)


def print_torch(expr: sympy.Basic) -> str:
    return TorchPrinter().doprint(expr)


def print_triton(expr: sympy.Basic) -> str:
    return TritonPrinter().doprint(expr)


def print_tilelang(expr: sympy.Basic) -> str:
    return TileLangPrinter().doprint(expr)


# The printer of each kernel language (the profile's ``backend``).
PRINTERS = {"triton": TritonPrinter, "tilelang": TileLangPrinter}


def format_formula(expr: sympy.Basic) -> str:
    """Readable formula; exact decimals such as 8943/200000 read as the float 0.044715 they came from."""
    long_fractions = {number: sympy.Float(float(number)) for number in expr.atoms(sympy.Rational) if number.q > 100}
    return FormulaPrinter().doprint(expr.xreplace(long_fractions))


__all__ = [
    "PRINTERS",
    "FormulaPrinter",
    "TileLangPrinter",
    "TorchPrinter",
    "TritonPrinter",
    "float_literal",
    "printing_written_constants",
    "uniform_symbols",
    "written_constants",
    "format_formula",
    "print_tilelang",
    "print_torch",
    "print_triton_index",
    "print_triton",
]
