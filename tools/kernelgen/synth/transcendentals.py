"""Fewer transcendental calls per element: calls rewritten onto the calls a kernel makes anyway, or onto fewer.

Transcendental throughput, not memory, bounds such kernels on a GPU, and the forms that read best are not the
cheapest. Simplification prefers ``sin(2u)`` to ``2 sin(u) cos(u)`` (fewer operations on paper), but a backward
kernel that also needs ``sin(u)`` and ``cos(u)`` then evaluates three transcendentals per element where two suffice
(snake's backward: ``sin(2 alpha x)`` beside ``sin(alpha x)`` and ``cos(alpha x)``). Mish, ``x tanh(softplus(x))``,
evaluates exp and log for the softplus, an exp for the tanh and, in its backward, another for ``sigmoid(x)``, where
one ``w = exp(x)`` and two divisions give the same values: ``tanh(log(1 + w)) = w (w + 2) / (w (w + 2) + 2)`` and
``sigmoid(x) = w / (w + 1)``.

The expressions one kernel evaluates are rewritten together, since they share their calls; a rewrite is kept only
when the kernel's cost in calls (softplus and log-sigmoid count two: an exp and a log) drops, so nothing changes
for a kernel that would trade one call for another. Every identity here is exact and cancellation-free where the
original is accurate: ``sin(2u) = 2 sin(u) cos(u)``; ``cos(2u)`` as ``2 cos(u)**2 - 1`` or ``1 - 2 sin(u)**2``,
whichever reuses a call the kernel makes; ``tanh(log(v))`` for ``v`` that sympy proves positive and whose
``w = v - 1`` expands without a constant (``exp(x)``, ``x**2``: no subtraction to cancel); ``sigmoid(±u)``
where the kernel computes ``exp(u)`` or the ``exp(-|u|)`` of a softplus of ``u`` (or of a logaddexp of ``a``, ``b``
with ``u = a - b``), both signs from one ``exp(-|u|)``; the tanh of a selection as the
selection of tanhs, 1 in a branch taken only where its argument is at least 10 (1 in fp32 there: torch's
softplus threshold). The rational forms are guarded where ``w`` is large (they would overflow to inf / inf),
with the value the original rounds to there, 1. (``exp(2u) = exp(u)**2`` would qualify too, but sympy folds
``exp(u)**2`` straight back into ``exp(2u)``.)
"""

import sympy

from tools.kernelgen.synth.functions import LogAddExp
from tools.kernelgen.synth.functions import LogSigmoid
from tools.kernelgen.synth.functions import Sigmoid
from tools.kernelgen.synth.functions import SigmoidOfLog
from tools.kernelgen.synth.functions import Softplus
from tools.kernelgen.synth.functions import TanhOfLog1p

# Applied functions that cost a transcendental evaluation (or a special-function unit op) per element.
TRANSCENDENTAL = (sympy.sin, sympy.cos, sympy.exp, sympy.log, sympy.tanh, sympy.erf)
# ... and the composite ones, with what they cost in such evaluations.
_COMPOSITE_COST = {Sigmoid: 1, Softplus: 2, LogSigmoid: 2, LogAddExp: 2}


def transcendental_calls(exprs) -> set[sympy.Expr]:
    """The distinct transcendental calls (``sin(alpha*x)``...) the expressions ``exprs`` evaluate."""
    return {call for expr in exprs for call in sympy.preorder_traversal(expr) if isinstance(call, TRANSCENDENTAL)}


def _half_argument(call: sympy.Expr) -> sympy.Expr | None:
    """``u`` when ``call`` is ``f(2*u)`` (a literal factor 2 in the argument), else None."""
    coefficient, rest = call.args[0].as_coeff_Mul()
    if coefficient.is_Number and coefficient % 2 == 0 and coefficient != 0:
        return coefficient / 2 * rest
    return None


def _costly_calls(exprs) -> set[sympy.Expr]:
    """The distinct calls of ``exprs`` that cost transcendental evaluations, composite ones included."""
    return {
        call
        for expr in exprs
        for call in sympy.preorder_traversal(expr)
        if isinstance(call, TRANSCENDENTAL) or type(call) in _COMPOSITE_COST
    }


def _cost(exprs) -> int:
    """Transcendental evaluations per element of a kernel evaluating ``exprs`` (each distinct call once)."""
    return sum(_COMPOSITE_COST.get(type(call), 1) for call in _costly_calls(exprs))


def share_transcendentals(exprs: dict[str, sympy.Expr]) -> dict[str, sympy.Expr]:
    """``exprs`` (name -> expression, evaluated by one kernel) with calls rewritten onto calls the kernel already
    makes, or onto cheaper ones, while that lowers the kernel's cost in transcendental evaluations."""
    current = dict(exprs)
    while (rewritten := _cheaper(current)) is not None:  # each rewrite lowers the cost, so this ends
        current = rewritten
    return {name: _quotients_as_sigmoids(expr) for name, expr in current.items()}


def _quotients_as_sigmoids(expr: sympy.Expr) -> sympy.Expr:
    """``exp(u) / (exp(u) + 1)`` factors as ``SigmoidOfLog(exp(u))`` (the derivative of ``log(1 + exp(u))``): the
    same value, guarded where ``exp(u)`` is large, so that a product such as ``exp(x) * x * ... / (exp(x) + 1)``
    does not overflow to inf * 0 where the quotient is 1 (x > 81 in fp32)."""

    def rewrite(node):
        if not isinstance(node, sympy.Mul):
            return node
        factors = list(node.args)
        for factor in node.args:
            if isinstance(factor, sympy.exp) and factor in factors:
                denominator = (factor + 1) ** -1
                if denominator in factors:
                    factors.remove(factor)
                    factors.remove(denominator)
                    factors.append(SigmoidOfLog(factor))
        return sympy.Mul(*factors) if len(factors) != len(node.args) else node

    return expr.replace(lambda node: isinstance(node, sympy.Mul), rewrite)


def _cheaper(exprs: dict[str, sympy.Expr]) -> dict[str, sympy.Expr] | None:
    """The rewrite that lowers the cost of ``exprs`` the most (the first in a fixed order among equals), or None.
    Best first, not first found: mish's backward could share its sigmoid's exponential with the softplus (cost 3)
    or compute tanh(softplus(x)) and then the sigmoid from one exp(x) (cost 1)."""
    cost = _cost(exprs.values())
    calls = _costly_calls(exprs.values())
    best = None
    for call in sorted(calls, key=sympy.default_sort_key):
        for replacements in _rewrites(call, calls):
            trial = {name: expr.xreplace(replacements) for name, expr in exprs.items()}
            trial_cost = _cost(trial.values())
            if trial_cost < cost and (best is None or trial_cost < best[0]):
                best = (trial_cost, trial)
    return None if best is None else best[1]


def _rewrites(call: sympy.Expr, calls: set) -> list[dict]:
    """Exact other forms of ``call`` (and of the calls it shares with), as replacements; ``calls``: every call the
    kernel makes."""
    if isinstance(call, (sympy.sin, sympy.cos)):
        u = _half_argument(call)
        if u is None:
            return []
        if isinstance(call, sympy.sin):
            return [{call: 2 * sympy.sin(u) * sympy.cos(u)}]
        return [{call: 2 * sympy.cos(u) ** 2 - 1}, {call: 1 - 2 * sympy.sin(u) ** 2}]
    if isinstance(call, sympy.tanh):
        value = call.args[0]
        if isinstance(value, sympy.Piecewise):  # the tanh of a selection is the selection of the tanhs
            forms = [
                sympy.S.One if _at_least(branch, condition, _TANH_IS_ONE) else _tanh_of_log(branch)
                for branch, condition in value.args
            ]
            if all(form is None for form in forms):
                return []
            pieces = [
                (form if form is not None else sympy.tanh(branch), condition)
                for form, (branch, condition) in zip(forms, value.args)
            ]
            return [{call: sympy.Piecewise(*pieces)}]
        form = _tanh_of_log(value)
        return [] if form is None else [{call: form}]
    if isinstance(call, Sigmoid):
        return _sigmoid_rewrites(call, calls)
    return []


def _sigmoid_rewrites(call: Sigmoid, calls: set) -> list[dict]:
    """``sigmoid(±u)`` onto an exponential the kernel computes: ``exp(u)`` itself, or ``e = exp(-|u|)`` as
    ``sigmoid(u) = (u >= 0 ? 1 : e) / (1 + e)``, where the kernel has that ``e`` already (an earlier rewrite) or
    takes it from its ``softplus(±u)`` / ``logsigmoid(±u)``, which are then written out (``max(u, 0) + log(1 +
    exp(-|u|))``) so that both read the one exponential."""
    v = call.args[0]
    rewrites = []
    for sign in (1, -1):
        u = sign * v
        if sympy.exp(u) in calls:
            w = sympy.exp(u)
            rewrites.append({call: SigmoidOfLog(w) if sign == 1 else 1 / (w + 1)})  # sigmoid(-inf) = 0 as it is
    pairs = [f for f in (Softplus(v), Softplus(-v), LogSigmoid(v), LogSigmoid(-v)) if f in calls]
    # logaddexp(a, b) = max(a, b) + log(1 + exp(-|a - b|)), and its derivatives are sigmoid(±(a - b)).
    pairs += [f for f in calls if isinstance(f, LogAddExp) and _opposite_or_equal(f.args[0] - f.args[1], v)]
    negated = [f for f in calls if isinstance(f, Sigmoid) and f != call and _opposite_or_equal(f.args[0], v)]
    e = sympy.exp(-sympy.Abs(v))
    if pairs or negated or e in calls:
        log_term = sympy.log(1 + e)
        written = {
            Softplus(v): sympy.Max(v, 0) + log_term,
            Softplus(-v): sympy.Max(-v, 0) + log_term,
            LogSigmoid(v): sympy.Min(v, 0) - log_term,
            LogSigmoid(-v): sympy.Min(-v, 0) - log_term,
        }
        replacements = {f: written[f] if f in written else sympy.Max(*f.args) + log_term for f in pairs}
        for sigmoid in [call, *negated]:
            u = sigmoid.args[0]
            replacements[sigmoid] = sympy.Piecewise((1, u >= 0), (e, True)) / (1 + e)
        rewrites.append(replacements)
    return rewrites


def _opposite_or_equal(u: sympy.Expr, v: sympy.Expr) -> bool:
    """Whether ``u`` is ``v`` or ``-v`` however sympy arranged the sign (``-(a - b) * c`` or ``(b - a) * c``)."""
    return sympy.expand(u - v) == 0 or sympy.expand(u + v) == 0


# tanh(u) is 1 in fp32 from here on (1 - tanh(10) = 4e-9 is below half an ulp of 1): a branch taken only there
# (torch's softplus threshold, x > 20) needs no tanh.
_TANH_IS_ONE = 10


def _at_least(value: sympy.Expr, condition, bound: float) -> bool:
    """Whether ``condition`` says ``value > c`` (or ``>=``) for a number ``c >= bound``."""
    if isinstance(condition, (sympy.StrictGreaterThan, sympy.GreaterThan)):
        low, high = condition.rhs, condition.lhs
    elif isinstance(condition, (sympy.StrictLessThan, sympy.LessThan)):
        low, high = condition.lhs, condition.rhs
    else:
        return False
    return high == value and low.is_number and bool(low >= bound)


def _tanh_of_log(value: sympy.Expr) -> sympy.Expr | None:
    w = _log_argument_minus_one(value)
    return None if w is None else TanhOfLog1p(w)


def _log_argument_minus_one(value: sympy.Expr) -> sympy.Expr | None:
    """``w`` with ``value = log(1 + w)`` (softplus(u): ``w = exp(u)``), where ``w`` has no constant term and ``1 + w``
    is positive; else None."""
    if isinstance(value, Softplus):
        return sympy.exp(value.args[0])
    if not isinstance(value, sympy.log) or not value.args[0].is_positive:
        return None
    w = sympy.expand(value.args[0] - 1)
    constant, _ = w.as_coeff_Add()
    return w if constant == 0 and w != 0 else None


__all__ = ["TRANSCENDENTAL", "share_transcendentals", "transcendental_calls"]
