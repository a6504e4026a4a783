"""THE op table of tier-1 synthesis (in the spirit of PyTorch's ``derivatives.yaml``).

One row per canonical op name: ``build`` turns arguments (sympy expressions or Python numbers) and keyword
constants into a sympy expression; ``derivative`` documents the gradient convention per tensor argument, as a
formula in the build function's argument names at the default constants. The documented derivatives are checked
against ``sympy.diff`` of ``build`` by the tests, so they cannot drift from what synthesis derives.

Conventions (match torch.autograd, kinks included): ``relu'(0) = 0``; ``leaky_relu' = x > 0 ? 1 : slope``;
``hardtanh' = 1`` strictly inside ``(min_val, max_val)``; ``clamp' = 1`` for ``min <= x <= max``;
``abs' = sign(x)``; ``maximum``/``minimum`` split ties half/half; ``where`` routes the gradient by its condition;
``elu' = x > 0 ? 1 : alpha * exp(x)``; ``softplus' = sigmoid(beta x)`` below the threshold, 1 above;
``logaddexp(a, b)`` by ``a`` is ``sigmoid(a - b)`` (1/2 where ``a == b``, 1 and 0 against a -inf).

Comparisons (``gt`` ... ``ne``) return sympy relationals; used as numbers they become 0/1 indicators, used as the
condition of ``where`` they select. ``log1p``/``expm1`` are built as ``log(1 + x)``/``exp(x) - 1``: exact math, but
in fp32 they lose relative precision for ``|x| << 1`` (no log1p/expm1 in core ``tl``).

Adding an op = adding one row to ``_ROWS``.
"""

import difflib
import inspect
import math

from dataclasses import dataclass
from dataclasses import field
from fractions import Fraction
from typing import Callable

import sympy

from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom
from sympy.logic.boolalg import BooleanFunction

from tools.kernelgen.synth.functions import CastToInput
from tools.kernelgen.synth.functions import Detached
from tools.kernelgen.synth.functions import Floor
from tools.kernelgen.synth.functions import LogAddExp
from tools.kernelgen.synth.functions import LogSigmoid
from tools.kernelgen.synth.functions import Maximum
from tools.kernelgen.synth.functions import Minimum
from tools.kernelgen.synth.functions import Relu
from tools.kernelgen.synth.functions import Root
from tools.kernelgen.synth.functions import Sigmoid
from tools.kernelgen.synth.functions import Sinc
from tools.kernelgen.synth.functions import Softplus
from tools.kernelgen.synth.functions import Take
from tools.kernelgen.synth.functions import indicator
from tools.kernelgen.synth.functions import select


class UnsupportedOpError(ValueError):
    """An op name that is not in the table; the message lists the nearest supported names."""

    def __init__(self, op: str):
        self.op = op
        nearest = difflib.get_close_matches(op, sorted(SUPPORTED_OPS), n=4, cutoff=0.5)
        hint = ", ".join(nearest) if nearest else "none close; see tools/kernelgen/synth/rules.py"
        super().__init__(f"unsupported element-wise op {op!r} (nearest supported: {hint})")


@dataclass(frozen=True)
class OpRule:
    name: str
    build: Callable[..., sympy.Basic]
    derivative: dict[str, str] = field(default_factory=dict)


def to_sympy_number(value) -> sympy.Expr:
    """A Python number as the most exact sympy number that prints back to the same float.

    Integral values become ``Integer`` (so ``x ** 2.0`` prints as a multiplication), short decimals such as
    ``0.044715`` or ``1e-6`` become the exact decimal ``Rational`` (sympy then folds constants exactly), and
    anything else stays a 53-bit ``Float``.
    """
    if isinstance(value, sympy.Basic):
        return value
    if isinstance(value, bool):
        return sympy.Integer(int(value))
    if isinstance(value, int):
        return sympy.Integer(value)
    if not isinstance(value, float):
        raise TypeError(f"expected a number or a sympy expression, got {type(value).__name__}: {value!r}")
    if math.isinf(value):
        # A masked fill's -inf (scores.masked_fill(~keep, float("-inf")) before a softmax): sympy's infinity, which
        # folds as IEEE does where it meets finite values (exp(-inf) = 0) and prints as float("-inf").
        return sympy.oo if value > 0 else -sympy.oo
    if not math.isfinite(value):
        raise ValueError(f"non-finite constant {value!r} cannot be part of an element-wise formula")
    if value.is_integer() and abs(value) < 2**53:
        return sympy.Integer(int(value))
    if Fraction(value).denominator <= 1024:
        return sympy.Rational(Fraction(value).numerator, Fraction(value).denominator)
    text = repr(value)
    if len(text.replace("-", "").replace(".", "").split("e")[0]) <= 8:
        return sympy.Rational(text)
    return sympy.Float(value)


def is_condition(arg) -> bool:
    """True for comparison results and their combinations (sympy symbols are ``Boolean`` too, so test kinds)."""
    return isinstance(arg, (Relational, BooleanAtom, BooleanFunction))


def _value(arg) -> sympy.Expr:
    """An argument used as a number: relationals (comparison results) become 0/1 indicators."""
    arg = to_sympy_number(arg)
    if is_condition(arg):
        return indicator(arg)
    return arg


def _condition(arg):
    """An argument used as a condition: relationals as they are, numbers as ``arg != 0`` (torch truthiness)."""
    arg = to_sympy_number(arg)
    if is_condition(arg):
        return arg
    return sympy.Ne(arg, 0)


def _real_exponent(exponent) -> sympy.Expr:
    """A constant or a run-time exponent (a hyper-parameter such as a focal loss's gamma, or a tensor)."""
    exponent = _value(exponent)
    if exponent.is_number and not exponent.is_real:
        raise ValueError(f"pow: the exponent must be real, got {exponent}")
    return exponent


def _add(a, b, alpha=1):
    return _value(a) + _value(alpha) * _value(b)


def _sub(a, b, alpha=1):
    return _value(a) - _value(alpha) * _value(b)


def _div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise ValueError(f"div: rounding_mode={rounding_mode!r} is not differentiable; only true division is supported")
    return _value(a) / _value(b)


def _pow(x, exponent):
    return _value(x) ** _real_exponent(exponent)


def _gelu(x, approximate="none"):
    x = _value(x)
    if approximate == "none":
        return x * (1 + sympy.erf(x / sympy.sqrt(2))) / 2
    if approximate == "tanh":
        inner = sympy.sqrt(2 / sympy.pi) * (x + sympy.Rational("0.044715") * x**3)
        return x * (1 + sympy.tanh(inner)) / 2
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _leaky_relu(x, negative_slope=0.01):
    x = _value(x)
    return select(x > 0, x, _value(negative_slope) * x)


def _rrelu(x, lower=0.125, upper=1.0 / 3.0, training=False):
    """F.rrelu out of training: a leaky ReLU of the mean slope; in training the slope is drawn per element."""
    if training:
        raise ValueError("rrelu: training=True draws a random slope per element; only training=False is element-wise")
    return _leaky_relu(x, (_value(lower) + _value(upper)) / 2)


def _kl_div_pointwise(x, t, log_target=False):
    """F.kl_div(x, t, reduction="none"): ``t * (log t - x)`` (0 where t is 0), or ``exp(t) * (t - x)`` of a log t."""
    x, t = _value(x), _value(t)
    if log_target:
        return sympy.exp(t) * (t - x)
    return _xlogy(t, t) - t * x


def _bce_with_logits_pointwise(x, y):
    """F.binary_cross_entropy_with_logits(x, y, reduction="none"): ``softplus(x) - x * y``, as torch computes it
    (max(x, 0) - x * y + log(1 + exp(-|x|))), never exp of a large x."""
    x, y = _value(x), _value(y)
    return Softplus(x) - x * y


def _bce_pointwise(p, y):
    """F.binary_cross_entropy(p, y, reduction="none"): ``-(y log p + (1 - y) log(1 - p))``, each log clamped at
    -100 as torch clamps it (a p of exactly 0 or 1 costs 100, not inf)."""
    p, y = _value(p), _value(y)
    return -(y * _clamp(_log(p), min=-100) + (1 - y) * _clamp(_log(1 - p), min=-100))


def _smooth_l1_pointwise(a, b, beta=1.0):
    """F.smooth_l1_loss(a, b, reduction="none", beta=beta): ``0.5 d**2 / beta`` where ``|d| < beta``, else
    ``|d| - 0.5 beta`` (d = a - b; beta 0 is the l1 loss, as torch has it)."""
    d, beta = _value(a) - _value(b), _value(beta)
    if beta == 0:
        return sympy.Abs(d)
    return select(sympy.Abs(d) < beta, d * d / (2 * beta), sympy.Abs(d) - beta / 2)


def _huber_pointwise(a, b, delta=1.0):
    """F.huber_loss(a, b, reduction="none", delta=delta): ``0.5 d**2`` where ``|d| < delta``, else
    ``delta (|d| - 0.5 delta)`` (d = a - b)."""
    d, delta = _value(a) - _value(b), _value(delta)
    return select(sympy.Abs(d) < delta, d * d / 2, delta * (sympy.Abs(d) - delta / 2))


def _elu(x, alpha=1.0):
    x = _value(x)
    return select(x > 0, x, _value(alpha) * (sympy.exp(x) - 1))


def _celu(x, alpha=1.0):
    x, alpha = _value(x), _value(alpha)
    return select(x > 0, x, alpha * (sympy.exp(x / alpha) - 1))


# torch.nn.functional.selu's constants (the self-normalizing fixed point).
SELU_ALPHA = sympy.Float("1.6732632423543772848170429916717")
SELU_SCALE = sympy.Float("1.0507009873554804934193349852946")


def _selu(x):
    x = _value(x)
    return SELU_SCALE * select(x > 0, x, SELU_ALPHA * (sympy.exp(x) - 1))


def _hardsigmoid(x):
    # relu6(x + 3) / 6; closed conditions at -3 and 3: torch's gradient is 1/6 only strictly inside.
    x = _value(x)
    return sympy.Piecewise((0, x <= -3), (1, x >= 3), (x / 6 + sympy.Rational(1, 2), True))


def _hardswish(x):
    # x * relu6(x + 3) / 6; torch's gradient is x / 3 + 1/2 strictly inside (-3, 3): 0 at -3, 1 at 3.
    x = _value(x)
    return sympy.Piecewise((0, x <= -3), (x, x >= 3), (x * (x + 3) / 6, True))


def _softshrink(x, lambd=0.5):
    # Closed conditions at +-lambd: torch's gradient is 1 only strictly outside [-lambd, lambd].
    x, lambd = _value(x), _value(lambd)
    return sympy.Piecewise((x - lambd, x > lambd), (x + lambd, x < -lambd), (0, True))


def _hardshrink(x, lambd=0.5):
    x, lambd = _value(x), _value(lambd)
    return sympy.Piecewise((x, x > lambd), (x, x < -lambd), (0, True))


def _threshold(x, threshold, value):
    x = _value(x)
    return select(x > _value(threshold), x, _value(value))


def _softplus(x, beta=1, threshold=20):
    x, beta = _value(x), _value(beta)
    if threshold is None:  # the plain function, as formulas print it: softplus(u, threshold=None)
        return Softplus(beta * x) / beta
    # torch returns x itself once beta * x exceeds the threshold (log(1 + exp(u)) == u there in fp32 anyway).
    return select(beta * x > _value(threshold), x, Softplus(beta * x) / beta)


def _logaddexp2(a, b):
    """torch.logaddexp2: ``log2(2**a + 2**b)``, the natural logaddexp of ``a ln 2`` and ``b ln 2`` over ``ln 2``
    (derivative ``sigmoid((a - b) ln 2)``)."""
    ln2 = sympy.log(2)
    return LogAddExp(_value(a) * ln2, _value(b) * ln2) / ln2


def _hardtanh(x, min_val=-1.0, max_val=1.0):
    x, low, high = _value(x), _value(min_val), _value(max_val)
    # Closed conditions at the bounds: torch's gradient is 1 only strictly inside (min_val, max_val).
    return sympy.Piecewise((low, x <= low), (high, x >= high), (x, True))


def _clamp(x, min=None, max=None):
    x = _value(x)
    low = None if min is None or min == -math.inf else _value(min)
    high = None if max is None or max == math.inf else _value(max)
    if low is None and high is None:
        raise ValueError("clamp: at least one of min and max must be given")
    # Strict conditions: torch's gradient is 1 for min <= x <= max, bounds included.
    crossing = low is not None and high is not None and not (low.is_number and high.is_number)
    if crossing and sympy.simplify(low + high) != 0:
        # Bounds that are not numbers may cross or tie (tensor bounds): torch's value min(max(x, min), max), and its
        # gradients: x's where min <= x <= max, min's where x < min < max, max's where x > max or max < min, and
        # nobody's where x < min == max. A symmetric clamp (-limit, limit: gpt-oss's SwiGLU) keeps the plain form.
        return sympy.Piecewise(
            (high, sympy.Or(x > high, high < low)),
            (low, sympy.And(x < low, low < high)),
            (x, sympy.And(x >= low, x <= high)),
            (Detached(low), True),
        )
    branches = []
    if high is not None:
        branches.append((high, x > high))
    if low is not None:
        branches.append((low, x < low))
    return sympy.Piecewise(*branches, (x, True))


def _log(x):
    """``log(x)``, with the exponentials of a product taken out: ``log(exp(u) * r) = u + log(r)`` (exact for real u
    and r > 0, which a real log needs anyway). A probability written ``exp(u - m) / s`` then never reaches log as a
    value that has underflowed to 0: ``p * log(p)`` is 0 where p underflows, not 0 * -inf = nan."""
    x = _value(x)
    if isinstance(x, sympy.Mul):
        powers = [f for f in x.args if isinstance(f, sympy.exp)]
        if powers:
            rest = sympy.Mul(*(f for f in x.args if not isinstance(f, sympy.exp)))
            return sympy.Add(*(f.args[0] for f in powers)) + sympy.log(rest)
    return sympy.log(x)


def _dropout(x, p=0.5, training=True):
    # F.dropout(x, training=False), an evaluation's dropout: x itself. In training it draws random numbers, which a
    # derived kernel does not.
    if training:
        raise ValueError(
            "dropout in training draws random numbers, which a derived kernel does not; pass training=False"
        )
    return _value(x)


def _round_half_even(x):
    # torch.round: to the nearest integer, a half to the even one (2.5 -> 2, 3.5 -> 4), from floor alone.
    x = _value(x)
    down = Floor(x)
    odd = down - 2 * Floor(down / 2)  # 1 where the integer below is odd
    return select(x - down > sympy.S.Half, down + 1, select(x - down < sympy.S.Half, down, down + odd))


def _xlogy(a, b):
    # torch.xlogy: 0 where a is 0, whatever b is (0 * log(0) would be nan). Where sympy shows a is never 0 (a
    # probability exp(u) / s), the guard folds away: _log keeps log(b) finite where a underflows.
    a, b = _value(a), _value(b)
    # Written as "a * log(b) where a is not 0": sympy's simplify folds the other order's branch (a * log(b) at a = 0
    # reads as 0 to it) back into a * log(b), which is nan at a = 0, b = 0. Where a is 0 the value is a * log(b) of
    # a b made positive: 0, with torch's gradients there (log(b) to a where b > 0, else 0; 0 to b).
    if a == b:  # t * log(t) (an entropy's, a KL's): 0 at t = 0, where torch's gradient is 0 / 0
        return select(sympy.Ne(a, 0), a * _log(b), sympy.S.Zero)
    return select(sympy.Ne(a, 0), a * _log(b), a * _log(select(b > 0, b, sympy.S.One)))


def _equality(relation, a, b):
    # sympy rewrites an equality with a piecewise side (col == clamp(target, 0)) into an if-then-else of
    # equalities, which neither prints nor reads back as written: keep it as the comparison it is.
    if isinstance(a, sympy.Piecewise) or isinstance(b, sympy.Piecewise):
        return relation(a, b, evaluate=False)
    return relation(a, b)


def _where(condition, x, y):
    if is_condition(x) and is_condition(y):  # a choice between conditions (sympy's form of one on a piecewise side)
        return sympy.ITE(_condition(condition), x, y)
    return select(_condition(condition), _value(x), _value(y))


def _masked_fill(x, mask, value):
    return select(_condition(mask), _value(value), _value(x))


def _mask(arg):
    """A mask operand of ``~``, ``&``, ``|``: a comparison (or a combination; a boolean input is its ``!= 0``, see
    ``analyze/program.py``); integers' bitwise ops are not masks."""
    arg = to_sympy_number(arg)
    if not is_condition(arg):
        raise ValueError(f"~, & and | combine masks (comparison results); got {arg}")
    return arg


def _take(values, index):
    # A per-class value at a class index (a loss's class weight w[target]): no element-wise meaning, see Take.
    values, index = _value(values), _value(index)
    if not isinstance(values, sympy.Symbol):
        raise ValueError(f"take: the values must be a per-class input, got {values}")
    return Take(values, index)


def _logit(x, eps=None):
    x = _value(x)
    if eps is not None:
        x = _clamp(x, eps, 1 - _value(eps))
    return _log(x) - sympy.log(1 - x)


def _unary(function: Callable[[sympy.Expr], sympy.Expr]) -> Callable[[sympy.Expr], sympy.Expr]:
    def build(x):
        return function(_value(x))

    return build


def _binary(function: Callable[[sympy.Expr, sympy.Expr], sympy.Basic]) -> Callable[..., sympy.Basic]:
    def build(a, b):
        return function(_value(a), _value(b))

    return build


_ROWS = (
    OpRule("add", _add, {"a": "1", "b": "1"}),
    OpRule("sub", _sub, {"a": "1", "b": "-1"}),
    OpRule("mul", _binary(lambda a, b: a * b), {"a": "b", "b": "a"}),
    OpRule("div", _div, {"a": "1 / b", "b": "-a / b**2"}),
    OpRule("neg", _unary(lambda x: -x), {"x": "-1"}),
    OpRule("pow", _pow),
    OpRule("square", _unary(lambda x: x**2), {"x": "2 * x"}),
    OpRule("reciprocal", _unary(lambda x: 1 / x), {"x": "-1 / x**2"}),
    OpRule("exp", _unary(sympy.exp), {"x": "exp(x)"}),
    OpRule("log", _unary(_log), {"x": "1 / x"}),
    OpRule("log1p", _unary(lambda x: sympy.log(1 + x)), {"x": "1 / (1 + x)"}),
    OpRule("expm1", _unary(lambda x: sympy.exp(x) - 1), {"x": "exp(x)"}),
    OpRule("sqrt", _unary(sympy.sqrt), {"x": "0.5 * rsqrt(x)"}),
    OpRule("rsqrt", _unary(lambda x: 1 / sympy.sqrt(x)), {"x": "-0.5 * rsqrt(x) / x"}),
    OpRule("abs", _unary(sympy.Abs), {"x": "sign(x)"}),
    OpRule("sign", _unary(sympy.sign), {"x": "0"}),
    OpRule("tanh", _unary(sympy.tanh), {"x": "1 - tanh(x)**2"}),
    OpRule("sigmoid", _unary(Sigmoid), {"x": "sigmoid(x) * (1 - sigmoid(x))"}),
    OpRule("silu", _unary(lambda x: x * Sigmoid(x)), {"x": "sigmoid(x) * (1 + x * (1 - sigmoid(x)))"}),
    OpRule("gelu", _gelu, {"x": "0.5 * (1 + erf(x / sqrt(2))) + x * exp(-x**2 / 2) / sqrt(2 * pi)"}),
    OpRule("relu", _unary(Relu), {"x": "where(x > 0, 1, 0)"}),
    OpRule("leaky_relu", _leaky_relu, {"x": "where(x > 0, 1, 0.01)"}),
    OpRule("kl_div_pointwise", _kl_div_pointwise, {"x": "-t"}),
    OpRule("bce_with_logits_pointwise", _bce_with_logits_pointwise, {"x": "sigmoid(x) - y", "y": "-x"}),
    OpRule("bce_pointwise", _bce_pointwise, {"p": "(p - y) / (p * (1 - p))", "y": "log(1 - p) - log(p)"}),
    OpRule("mse_pointwise", _binary(lambda a, b: (a - b) ** 2), {"a": "2 * (a - b)", "b": "-2 * (a - b)"}),
    OpRule("l1_pointwise", _binary(lambda a, b: sympy.Abs(a - b)), {"a": "sign(a - b)", "b": "-sign(a - b)"}),
    OpRule("smooth_l1_pointwise", _smooth_l1_pointwise),
    OpRule("huber_pointwise", _huber_pointwise),
    OpRule("rrelu", _rrelu, {"x": "where(x > 0, 1, (0.125 + 1 / 3) / 2)"}),
    OpRule("elu", _elu, {"x": "where(x > 0, 1, exp(x))"}),
    OpRule("softplus", _softplus, {"x": "where(x > 20, 1, sigmoid(x))"}),
    OpRule(
        "mish",
        _unary(lambda x: x * sympy.tanh(Softplus(x))),
        {"x": "tanh(log1p(exp(x))) + x * sigmoid(x) * (1 - tanh(log1p(exp(x)))**2)"},
    ),
    OpRule("logsigmoid", _unary(LogSigmoid), {"x": "1 - sigmoid(x)"}),
    OpRule("logaddexp", _binary(LogAddExp), {"a": "sigmoid(a - b)", "b": "sigmoid(b - a)"}),
    OpRule("logaddexp2", _logaddexp2, {"a": "sigmoid(log(2) * (a - b))", "b": "sigmoid(log(2) * (b - a))"}),
    OpRule("hypot", _binary(lambda a, b: sympy.sqrt(a * a + b * b))),
    OpRule("hardtanh", _hardtanh, {"x": "where((x > -1) & (x < 1), 1, 0)"}),
    OpRule("clamp", _clamp),
    OpRule("where", _where, {"x": "where(condition, 1, 0)", "y": "where(condition, 0, 1)"}),
    OpRule("gt", _binary(lambda a, b: a > b)),
    OpRule("ge", _binary(lambda a, b: a >= b)),
    OpRule("lt", _binary(lambda a, b: a < b)),
    OpRule("le", _binary(lambda a, b: a <= b)),
    OpRule("eq", _binary(lambda a, b: _equality(sympy.Eq, a, b))),
    OpRule("ne", _binary(lambda a, b: _equality(sympy.Ne, a, b))),
    OpRule("zeros_like", lambda x, **_: sympy.S.Zero),
    OpRule("ones_like", lambda x, **_: sympy.S.One),
    OpRule("full_like", lambda x, fill_value, **_: _value(fill_value)),
    OpRule("bool", lambda x: _condition(x)),  # x.bool(): x != 0 (a comparison stays itself)
    OpRule("logical_not", lambda x: sympy.Not(_mask(x))),
    OpRule("logical_and", lambda a, b: sympy.And(_mask(a), _mask(b))),
    OpRule("logical_or", lambda a, b: sympy.Or(_mask(a), _mask(b))),
    OpRule("masked_fill", _masked_fill, {"x": "where(mask, 0, 1)"}),
    OpRule("maximum", _binary(Maximum), {"a": "where(a > b, 1, where(a == b, 0.5, 0))"}),
    OpRule("minimum", _binary(Minimum), {"a": "where(a < b, 1, where(a == b, 0.5, 0))"}),
    # torch.fmax / fmin: a where it is at least (most) b, else b; a tie gives a the whole gradient, as torch does
    # (maximum splits it), and a nan a is passed over for b.
    OpRule("fmax", _binary(lambda a, b: select(a >= b, a, b))),
    OpRule("fmin", _binary(lambda a, b: select(a <= b, a, b))),
    OpRule("sin", _unary(sympy.sin), {"x": "cos(x)"}),
    OpRule("cos", _unary(sympy.cos), {"x": "-sin(x)"}),
    OpRule("erf", _unary(sympy.erf), {"x": "2 / sqrt(pi) * exp(-x**2)"}),
    OpRule("cast_to_input", _unary(CastToInput), {"x": "1"}),
    OpRule("detach", _unary(Detached), {"x": "0"}),
    OpRule("take", _take),
    OpRule("xlogy", _xlogy, {"a": "where((a == 0) & (b <= 0), 0, log(b))", "b": "where(a == 0, 0, a / b)"}),
    # torch.special.entr: -x * log(x), 0 at x = 0 (of probabilities; torch gives -inf below 0)
    OpRule("entr", lambda x: -_xlogy(x, x), {"x": "where(x == 0, 0, -log(x) - 1)"}),
    OpRule("root", lambda v, p=2: Root(_value(v), _value(p)), {"v": "where(v == 0, 0, 0.5 * rsqrt(v))"}),
    OpRule("celu", _celu, {"x": "where(x > 0, 1, exp(x))"}),
    OpRule("selu", _selu, {"x": "1.0507009873554805 * where(x > 0, 1, 1.6732632423543772 * exp(x))"}),
    OpRule("hardsigmoid", _hardsigmoid, {"x": "where((x > -3) & (x < 3), 1 / 6, 0)"}),
    OpRule("hardswish", _hardswish, {"x": "where(x <= -3, 0, where(x < 3, x / 3 + 0.5, 1))"}),
    OpRule("softsign", _unary(lambda x: x / (1 + sympy.Abs(x))), {"x": "1 / (1 + abs(x))**2"}),
    OpRule("threshold", _threshold, {"x": "where(x > threshold, 1, 0)"}),
    OpRule("tanhshrink", _unary(lambda x: x - sympy.tanh(x)), {"x": "tanh(x)**2"}),
    # erfc as 1 - erf: exact to fp32's absolute rounding (its relative error grows where erfc is below ~1e-7).
    OpRule("erfc", _unary(lambda x: 1 - sympy.erf(x)), {"x": "-2 / sqrt(pi) * exp(-x**2)"}),
    OpRule("sinh", _unary(lambda x: (sympy.exp(x) - sympy.exp(-x)) / 2), {"x": "(exp(x) + exp(-x)) / 2"}),
    OpRule("cosh", _unary(lambda x: (sympy.exp(x) + sympy.exp(-x)) / 2), {"x": "(exp(x) - exp(-x)) / 2"}),
    OpRule("log2", _unary(lambda x: _log(x) / sympy.log(2)), {"x": "1 / (x * log(2))"}),
    OpRule("log10", _unary(lambda x: _log(x) / sympy.log(10)), {"x": "1 / (x * log(10))"}),
    OpRule("softshrink", _softshrink, {"x": "where(abs(x) > 0.5, 1, 0)"}),
    OpRule("hardshrink", _hardshrink, {"x": "where(abs(x) > 0.5, 1, 0)"}),
    OpRule("exp2", _unary(lambda x: sympy.exp(x * sympy.log(2))), {"x": "log(2) * exp2(x)"}),
    OpRule("ndtr", _unary(lambda x: (1 + sympy.erf(x / sympy.sqrt(2))) / 2), {"x": "exp(-x**2 / 2) / sqrt(2 * pi)"}),
    OpRule("lerp", lambda input, end, weight: _value(input) + _value(weight) * (_value(end) - _value(input))),
    OpRule(
        "addcmul",
        lambda input, tensor1, tensor2, value=1: _value(input) + _value(value) * _value(tensor1) * _value(tensor2),
    ),
    # Steps, all of floor: their derivative is 0, as torch's autograd gives.
    OpRule("dropout", _dropout),
    OpRule("floor", _unary(Floor), {"x": "0"}),
    OpRule("ceil", _unary(lambda x: -Floor(-x)), {"x": "0"}),
    OpRule("trunc", _unary(lambda x: select(x >= 0, Floor(x), -Floor(-x))), {"x": "0"}),
    OpRule("round", _unary(_round_half_even), {"x": "0"}),
    OpRule(
        "addcdiv",
        lambda input, tensor1, tensor2, value=1: _value(input) + _value(value) * _value(tensor1) / _value(tensor2),
    ),
    # asinh as log(|x| + sqrt(x^2 + 1)) with x's sign: no cancellation of x + sqrt(x^2 + 1) below 0.
    OpRule(
        "asinh",
        _unary(lambda x: select(x >= 0, _log(x + sympy.sqrt(x**2 + 1)), -_log(-x + sympy.sqrt(x**2 + 1)))),
        {"x": "rsqrt(x**2 + 1)"},
    ),
    # atanh as (log(1 + x) - log(1 - x)) / 2, both printed with log1p where the kernel has it (exact near 0); nan
    # outside [-1, 1] and +-inf at the ends, as torch gives.
    OpRule("atanh", _unary(lambda x: (sympy.log(1 + x) - sympy.log(1 - x)) / 2), {"x": "1 / (1 - x**2)"}),
    # acosh as log(x + sqrt((x - 1)(x + 1))): x >= 1, nan below as torch gives; x - 1 is exact near 1, where
    # x^2 - 1 would cancel.
    OpRule("acosh", _unary(lambda x: _log(x + sympy.sqrt((x - 1) * (x + 1)))), {"x": "rsqrt(x**2 - 1)"}),
    # torch.logit(x, eps): log(x / (1 - x)) of x clamped to [eps, 1 - eps] (torch's gradient is 0 outside it).
    OpRule("logit", _logit, {"x": "1 / (x * (1 - x))"}),
    # torch.special.sinc: sin(pi x) / (pi x), 1 at 0 (its derivative: functions.Sinc).
    OpRule(
        "sinc",
        _unary(Sinc),
        {
            "x": "where(abs(pi * x) < 0.1, pi * (-(pi * x) / 3 + (pi * x)**3 / 30 - (pi * x)**5 / 840), "
            "(cos(pi * x) * pi * x - sin(pi * x)) / (pi * x**2))"
        },
    ),
    # torch.copysign(a, b): |a| with b's sign (b's -0.0 is read as +0.0); its gradient to a is the sign it keeps.
    OpRule(
        "copysign",
        _binary(lambda a, b: select(b >= 0, sympy.Abs(a), -sympy.Abs(a))),
        {"a": "where(b >= 0, sign(a), -sign(a))", "b": "0"},
    ),
)

OPS: dict[str, OpRule] = {row.name: row for row in _ROWS}
SUPPORTED_OPS: frozenset[str] = frozenset(OPS)

# Keyword arguments that never change the math (torch's in-place flags).
_IGNORED_KWARGS = ("inplace",)


def tensor_arguments(name: str) -> list[str]:
    """Names of the positional arguments of op ``name``'s build function (``x``, ``a``/``b``, ``condition``...)."""
    rule = OPS.get(name)
    if rule is None:
        raise UnsupportedOpError(name)
    parameters = inspect.signature(rule.build).parameters.values()
    return [p.name for p in parameters if p.default is inspect.Parameter.empty]


def apply_op(name: str, *args, **kwargs) -> sympy.Basic:
    """The sympy expression of op ``name`` applied to ``args`` with keyword constants ``kwargs``."""
    rule = OPS.get(name)
    if rule is None:
        raise UnsupportedOpError(name)
    for ignored in _IGNORED_KWARGS:
        kwargs.pop(ignored, None)
    try:
        bound = inspect.signature(rule.build).bind(*args, **kwargs)
    except TypeError as error:
        raise ValueError(f"{name}: {error}") from None
    return rule.build(*bound.args, **bound.kwargs)


__all__ = [
    "OPS",
    "SUPPORTED_OPS",
    "OpRule",
    "UnsupportedOpError",
    "apply_op",
    "is_condition",
    "tensor_arguments",
    "to_sympy_number",
]
