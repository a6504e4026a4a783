"""Custom sympy functions for element-wise ops that should print as one Triton call.

Each class differentiates by its own rule (``fdiff``) instead of being expanded into ``exp``/``log``: the gradient
of ``sigmoid`` stays ``sigmoid(x) * (1 - sigmoid(x))`` rather than a ratio of exponentials that overflows in fp32,
and piecewise ops get torch's derivative at their kinks (``relu'(0) = 0``, ties of ``maximum`` split half/half).

``as_builtin()`` rewrites a call into plain sympy math; numeric evaluation (constant folding) goes through it.
``_sympystr`` prints the canonical op name (``sigmoid(x)``), so ``str()`` of an expression reads like the formulas
``parse_formula`` accepts.
"""

import operator

import sympy

from mpmath.libmp import prec_to_dps
from sympy.core.logic import fuzzy_and


def indicator(condition) -> sympy.Expr:
    """1 where ``condition`` holds, else 0: the derivative of a piecewise-linear op (almost everywhere)."""
    return sympy.Piecewise((sympy.S.One, condition), (sympy.S.Zero, True))


def select(condition, if_true, if_false) -> sympy.Expr:
    """``if_true`` where ``condition`` holds, else ``if_false`` (prints as ``tl.where``)."""
    return sympy.Piecewise((if_true, condition), (if_false, True))


class ElementwiseFunction(sympy.Function):
    """Base class: real for real arguments, numeric values through ``as_builtin``, printed by op name."""

    op_name = ""

    def as_builtin(self) -> sympy.Expr:
        raise NotImplementedError

    def _eval_is_real(self):
        return fuzzy_and(arg.is_real for arg in self.args)

    def _eval_evalf(self, prec):
        if not all(arg.is_number for arg in self.args):
            return None
        try:
            return sympy.N(self.as_builtin(), prec_to_dps(prec))
        except (TypeError, ValueError):  # complex arguments (log(1 - beta) at beta > 1): Max cannot compare them
            return None

    def _sympystr(self, printer):
        return f"{self.op_name}({', '.join(printer._print(arg) for arg in self.args)})"


class Sigmoid(ElementwiseFunction):
    """``1 / (1 + exp(-x))``; derivative ``s * (1 - s)``."""

    op_name = "sigmoid"
    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.S.Half
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return self * (1 - self)

    def _eval_is_positive(self):
        return self.args[0].is_real

    def as_builtin(self):
        return 1 / (1 + sympy.exp(-self.args[0]))


class Softplus(ElementwiseFunction):
    """``log(1 + exp(x))`` with no threshold (the thresholded torch op is a ``Piecewise`` around it)."""

    op_name = "softplus"
    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return Sigmoid(self.args[0])

    def _eval_is_positive(self):
        return self.args[0].is_real

    def as_builtin(self):
        return sympy.log(1 + sympy.exp(self.args[0]))

    def _sympystr(self, printer):
        # ``softplus(x)`` in a formula means torch's thresholded op; this is the plain function.
        return f"softplus({printer._print(self.args[0])}, threshold=None)"


class LogSigmoid(ElementwiseFunction):
    """``log(sigmoid(x)) = -softplus(-x)``; derivative ``sigmoid(-x)``."""

    op_name = "logsigmoid"
    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return Sigmoid(-self.args[0])

    def _eval_is_negative(self):
        return self.args[0].is_real

    def as_builtin(self):
        return -sympy.log(1 + sympy.exp(-self.args[0]))


class LogAddExp(ElementwiseFunction):
    """``log(exp(a) + exp(b))`` (``torch.logaddexp``); derivatives ``sigmoid(a - b)`` and ``sigmoid(b - a)``, as
    torch's backward computes them (never the ratio ``exp(a) / (exp(a) + exp(b))``, which overflows). Kernels print
    the overflow-free form ``max(a, b) + log(1 + exp(-|a - b|))``; ``logaddexp2`` is this one of ``a ln 2`` and
    ``b ln 2``, divided by ``ln 2``."""

    op_name = "logaddexp"
    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if a == b:
            return a + sympy.log(2)
        return None

    def fdiff(self, argindex=1):
        if argindex not in (1, 2):
            raise sympy.ArgumentIndexError(self, argindex)
        this, other = self.args if argindex == 1 else self.args[::-1]
        return Sigmoid(this - other)

    def as_builtin(self):
        a, b = self.args
        return sympy.Max(a, b) + sympy.log(1 + sympy.exp(-sympy.Abs(a - b)))


class Root(ElementwiseFunction):
    """``v ** (1 / p)`` of a norm or a standard deviation (``root(v, p)``): its gradient is 0 where ``v`` is 0, as
    torch's norm and std backwards mask it (a zero row's norm, a constant row's std), where the plain root's
    derivative is 1 / 0. A function of its own: simplification would fold a ``where(v == 0, 0, ...)`` around the
    power away, as the values agree there."""

    op_name = "root"
    nargs = 2

    @classmethod
    def eval(cls, v, p):
        if v.is_number and p.is_number:
            return v ** (1 / p)
        return None

    def fdiff(self, argindex=1):
        v, p = self.args
        if argindex == 1:
            return sympy.Piecewise((0, sympy.Eq(v, 0)), (v ** (1 / p - 1) / p, True))
        if argindex == 2:
            return sympy.Piecewise((0, sympy.Eq(v, 0)), (-self * sympy.log(v) / p**2, True))
        raise sympy.ArgumentIndexError(self, argindex)

    def _eval_is_nonnegative(self):
        return self.args[0].is_real

    def as_builtin(self):
        return self.args[0] ** (1 / self.args[1])


class Relu(ElementwiseFunction):
    """``max(x, 0)``; derivative ``x > 0 ? 1 : 0`` (torch: 0 at the kink)."""

    op_name = "relu"
    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_number and x.is_real:
            return sympy.Max(x, 0)
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return indicator(self.args[0] > 0)

    def _eval_is_nonnegative(self):
        return self.args[0].is_real

    def as_builtin(self):
        return sympy.Max(self.args[0], 0)


class Floor(ElementwiseFunction):
    """The largest integer at most ``x``: a step, whose derivative is 0 wherever it is defined, as torch's autograd
    gives (``torch.floor``, ``ceil``, ``round`` and ``trunc`` are written with it; a straight-through estimator's
    ``x + (round(x) - x).detach()`` takes its gradient from ``x`` alone)."""

    op_name = "floor"
    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_number and x.is_real:
            return sympy.floor(x)
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return sympy.S.Zero

    def as_builtin(self):
        return sympy.floor(self.args[0])

    def _eval_evalf(self, prec):
        # A sampled point where the argument is nan or infinite (the simplifier's checks) has no floor to give.
        value = self.args[0].evalf(prec)
        return sympy.floor(value) if value.is_number and value.is_finite else None


class Sinc(ElementwiseFunction):
    """torch.special.sinc: ``sin(pi x) / (pi x)``, 1 at 0. Its derivative ``pi (u cos u - sin u) / u^2`` (u = pi x)
    cancels below |u| of 0.1 in fp32 (a difference of two values near u of its u^3 / 3): there a Taylor series
    of it, exact to fp32's precision, takes its place."""

    op_name = "sinc"
    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.S.One
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        u = sympy.pi * self.args[0]
        series = sympy.pi * (-u / 3 + u**3 / 30 - u**5 / 840)
        exact = sympy.pi * (u * sympy.cos(u) - sympy.sin(u)) / u**2
        return select(sympy.Abs(u) < sympy.Rational(1, 10), series, exact)

    def as_builtin(self):
        u = sympy.pi * self.args[0]
        return select(sympy.Ne(self.args[0], 0), sympy.sin(u) / u, sympy.S.One)


class Log1p(ElementwiseFunction):
    """``log(1 + x)``, made only for printing (``derive.print_elementwise``): with libdevice's ``log1p`` in a pass
    whose math library is libdevice, or as ``Log1pOfUnit``; so that naming ``1 + x`` as a temporary cannot hide the
    ``1 +`` (or ``x``'s range) from the printer."""

    op_name = "log1p"
    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return 1 / (1 + self.args[0])

    def as_builtin(self):
        return sympy.log(1 + self.args[0])


class Expm1(ElementwiseFunction):
    """``exp(x) - 1``, made only for printing (``derive.print_elementwise``), by the utils ``expm1``."""

    op_name = "expm1"
    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return sympy.exp(self.args[0])

    def as_builtin(self):
        return sympy.exp(self.args[0]) - 1


class Erfc(ElementwiseFunction):
    """``1 - erf(x)``, made only for printing (``derive.print_elementwise``), by the utils ``erfc``."""

    op_name = "erfc"
    nargs = 1

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return -2 / sympy.sqrt(sympy.pi) * sympy.exp(-(self.args[0] ** 2))

    def as_builtin(self):
        return 1 - sympy.erf(self.args[0])


class Log1pOfUnit(Log1p):
    """``log(1 + x)`` with ``x`` shown to lie in [0, 1] (``in_unit_interval``) before its parts were named as
    temporaries, printed with the utils ``log1p_unit`` polynomial by printers that have it."""


def in_unit_interval(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is provably in [0, 1] for every real value of its symbols: ``exp(w)`` with ``w`` provably
    non-positive (softplus's and logsigmoid's ``exp(-|u|)``), a sigmoid, a constant in [0, 1], or a product of such."""
    if expr.is_number:
        return bool(expr.is_real and 0 <= expr <= 1)
    if isinstance(expr, sympy.exp):
        return bool(expr.args[0].is_nonpositive)
    if isinstance(expr, Sigmoid):
        return bool(expr.args[0].is_real)
    if isinstance(expr, sympy.Mul):
        return all(in_unit_interval(factor) for factor in expr.args)
    return False


class KernelForm(ElementwiseFunction):
    """A value that kernels compute by a cheaper exact form (``kernel_form()``, what kernel printers print), kept one
    opaque node until printed, so that sympy neither spreads its branches into each power or product of it nor
    folds ``w**2`` back into a new ``exp(2u)``; formulas print the function it stands for (``as_builtin``). Made by
    ``transcendentals.share_transcendentals`` after the derivation, so it needs no derivative of its own."""

    def kernel_form(self) -> sympy.Expr:
        raise NotImplementedError

    def _sympystr(self, printer):
        return printer._print(self.as_builtin())


# Where w is this large, tanh(log(1 + w)) and w / (1 + w) are 1 in fp32 (they are from w ~ 1e8), and w (w + 2) is
# still far from overflowing (at w ~ 1.8e19): the guard keeps inf / inf out and changes no value.
LARGE_W = 1e9


def _guarded(w: sympy.Expr, rational: sympy.Expr) -> sympy.Expr:
    """``rational`` (a ratio of polynomials in ``w`` that tends to 1), 1 where ``w > LARGE_W``; unguarded where ``w``
    is provably at most 1 (``exp(-|u|)``), so the kernel compares nothing it cannot reach."""
    if in_unit_interval(w):
        return rational
    return sympy.Piecewise((1, w > LARGE_W), (rational, True))


class TanhOfLog1p(KernelForm):
    """``tanh(log(1 + w))`` for ``w > -1`` (``tanh(softplus(u))`` with ``w = exp(u)``) as ``n / (n + 2)``, ``n = w (w
    + 2)``: one division, where the plain form takes a log and a tanh; no subtraction, so no cancellation."""

    op_name = "tanh_log1p"
    nargs = 1

    def as_builtin(self):
        return sympy.tanh(sympy.log(1 + self.args[0]))

    def kernel_form(self):
        w = self.args[0]
        n = w * (w + 2)
        return _guarded(w, n / (n + 2))


class SigmoidOfLog(KernelForm):
    """``sigmoid(log(w)) = w / (w + 1)`` for ``w > 0``: ``sigmoid(u)`` in a kernel that computes ``w = exp(u)``
    anyway, one division instead of another exp."""

    op_name = "sigmoid_log"
    nargs = 1

    def as_builtin(self):
        return Sigmoid(sympy.log(self.args[0]))

    def kernel_form(self):
        w = self.args[0]
        return _guarded(w, w / (w + 1))


class _SameValue(ElementwiseFunction):
    """An op whose value is its argument's (as sympy computes): only its derivative, ``DERIVATIVE``, says what it
    does to a gradient. Applied twice, it is applied once."""

    nargs = 1
    DERIVATIVE = sympy.S.One

    @classmethod
    def eval(cls, x):
        if isinstance(x, cls):
            return x
        return None

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sympy.ArgumentIndexError(self, argindex)
        return self.DERIVATIVE

    def as_builtin(self):
        return self.args[0]


class CastToInput(_SameValue):
    """The value rounded to the first input's dtype and back (``.to(x.dtype)`` in a reference that computes in fp32,
    as Llama's RMSNorm does before the weight). Rounding passes the gradient through unchanged, as torch's cast."""

    op_name = "cast_to_input"


def as_stored(output: sympy.Expr) -> sympy.Expr:
    """An output as a kernel stores it: a rounding of the whole output to the inputs' dtype is the store's own (the
    output is of that dtype), so it is left to the store."""
    return output.args[0] if isinstance(output, CastToInput) else output


class Detached(_SameValue):
    """``x.detach()``: the value itself, through which no gradient flows (torch's stop-gradient)."""

    op_name = "detach"
    DERIVATIVE = sympy.S.Zero

    @classmethod
    def eval(cls, x):
        return x if x.is_number else super().eval(x)


class _Extremum(ElementwiseFunction):
    """Element-wise max/min of two arguments; torch splits the gradient half/half where ``a == b``."""

    nargs = 2
    builtin = None  # sympy.Max / sympy.Min
    wins = None  # operator.gt / operator.lt: when ``this`` is the result, and so receives the whole gradient

    @classmethod
    def eval(cls, a, b):
        if a == b:
            return a
        if a.is_number and b.is_number:
            return cls.builtin(a, b)
        return None

    def fdiff(self, argindex=1):
        if argindex not in (1, 2):
            raise sympy.ArgumentIndexError(self, argindex)
        this, other = self.args if argindex == 1 else self.args[::-1]
        return sympy.Piecewise((1, type(self).wins(this, other)), (sympy.S.Half, sympy.Eq(this, other)), (0, True))

    def as_builtin(self):
        return self.builtin(*self.args)


class Maximum(_Extremum):
    op_name = "maximum"
    builtin = sympy.Max
    wins = operator.gt


class Minimum(_Extremum):
    op_name = "minimum"
    builtin = sympy.Min
    wins = operator.lt


class Take(sympy.Function):
    """``values[index]``: the element of a per-class tensor (class weights, ``[n_cols]``) at one class index per row,
    a per-row value. Synthesis loads it once per row (``synth/losses.py``); nothing differentiates it (class weights
    take no gradient, an index has none)."""

    nargs = 2

    def _eval_is_real(self):
        return True

    def fdiff(self, argindex=1):
        if argindex not in (1, 2):
            raise sympy.ArgumentIndexError(self, argindex)
        return sympy.S.Zero


class TensorPower(sympy.Function):
    """``base ** exponent`` where the exponent is differentiated too (``torch.pow`` of two tensors, a learnable
    exponent), standing in for the power while ``sympy.diff`` runs (``derive.differentiate``): its derivatives are
    torch's. By the exponent, ``base ** exponent * log(base)``, which torch takes as 0 where ``base == 0`` and
    ``exponent >= 0`` (sympy's form is ``0 * -inf``, NaN, where ``relu(x) ** p`` has ``x <= 0``); by the base,
    ``exponent * base ** (exponent - 1)``, taken as 0 where ``exponent == 0`` (not ``0 * inf`` at ``base == 0``)."""

    nargs = 2

    def _eval_is_real(self):
        return fuzzy_and(arg.is_real for arg in self.args)

    def fdiff(self, argindex=1):
        base, exponent = self.args
        if argindex == 1:
            return select(sympy.Ne(exponent, 0), exponent * base ** (exponent - 1), sympy.S.Zero)
        if argindex == 2:
            if base == 0:  # a branch of the power of a clamped value, 0 ** exponent: log(0) * inf where exponent < 0
                return select(exponent >= 0, sympy.S.Zero, -sympy.oo)
            masked = sympy.And(sympy.Eq(base, 0), exponent >= 0)
            return select(masked, sympy.S.Zero, base**exponent * sympy.log(base))
        raise sympy.ArgumentIndexError(self, argindex)


__all__ = [
    "CastToInput",
    "Detached",
    "ElementwiseFunction",
    "Floor",
    "Sinc",
    "LogAddExp",
    "LogSigmoid",
    "Maximum",
    "Minimum",
    "Relu",
    "Root",
    "Sigmoid",
    "Softplus",
    "TensorPower",
    "Take",
    "indicator",
    "select",
]
