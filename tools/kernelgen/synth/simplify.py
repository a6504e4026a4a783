"""Bounded, deterministic simplification that never trades numerical safety for fewer operations.

Candidates: the expression itself, ``factor_terms``, ``together``, ``cancel``/``factor`` (rational functions) or
``piecewise_fold`` (piecewise ones), and ``sympy.simplify`` for small expressions only: its cost grows steeply
with size (seconds at 20 operations, minutes at 30). The winner has the fewest operations (``count_ops``, then
the shortest text, then the earliest candidate). A candidate that introduces a function the input did not use is
rejected: ``simplify`` likes to turn ``1 - tanh(u)**2`` into ``1/cosh(u)**2`` or sigmoids into ratios of
exponentials, which are shorter on paper but overflow in fp32. So is one that divides by a value the input does not
divide by (a power of it with an exponent not known to be nonnegative): ``sign(x) * |x|**(p - 1)`` as
``x * |x**(p - 2)|`` is 0 * inf at ``x = 0``, where the input is 0.

The size limits make the result deterministic; a wall-clock limit on ``sympy.simplify`` (main thread only) is a
safety net for pathological inputs below the size limit, not the normal way out.
"""

import contextlib
import signal
import threading

import sympy

from sympy.core.function import Function
from sympy.functions.elementary.miscellaneous import MinMaxBase

from tools.kernelgen.synth.renaming import RenamingMemo

# sympy.simplify runs only up to this many operations; the cheap rewrites up to the second limit.
FULL_SIMPLIFY_MAX_OPS = 20
REWRITE_MAX_OPS = 400
SIMPLIFY_TIME_LIMIT_S = 10.0
# Simplified expressions by expression, kept for the derivations a process repeats (over other names too).
_SIMPLIFIED = RenamingMemo(kept=4096)


class _OutOfTime(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise ``_OutOfTime`` after ``seconds`` (a no-op off the main thread or without SIGALRM)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, on_alarm)
    # Re-fire every 0.25 s: sympy swallows some exceptions internally, the next alarm then gets out.
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.25)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _function_kinds(expr: sympy.Basic) -> set[type]:
    return {type(node) for node in sympy.preorder_traversal(expr) if isinstance(node, (Function, MinMaxBase))}


def _divisors(expr: sympy.Basic) -> set[sympy.Expr]:
    """The non-constant bases ``expr`` raises to an exponent that may be negative: where they are 0 it may be
    infinite."""
    return {
        node.base
        for node in sympy.preorder_traversal(expr)
        if isinstance(node, sympy.Pow) and not node.base.is_number and node.exp.is_nonnegative is not True
    }


def _exponential_bases(expr: sympy.Basic) -> set[sympy.Expr]:
    """The numbers ``expr`` raises to a non-constant exponent (2 of ``2 ** x``): factoring ``2 ** x + 3 ** x`` into
    ``2 ** -x * (4 ** x + 6 ** x)`` makes new ones, which overflow fp32 where the written terms do not."""
    return {
        node.base
        for node in sympy.preorder_traversal(expr)
        if isinstance(node, sympy.Pow) and node.base.is_number and not node.exp.is_number
    }


def _has_large_rational(expr: sympy.Basic) -> bool:
    return any(
        isinstance(node, sympy.Rational) and max(abs(node.p), node.q) > 10**6 for node in sympy.preorder_traversal(expr)
    )


def _candidates(expr: sympy.Expr, size: int):
    yield lambda: expr
    if size > REWRITE_MAX_OPS:
        return
    yield lambda: sympy.factor_terms(expr)
    yield lambda: sympy.together(expr)
    if expr.has(sympy.Piecewise):
        yield lambda: sympy.piecewise_fold(expr)
    elif not _has_large_rational(expr):  # as polynomials, exp(1e10 * x**2 / 19999899241) has degree 1e10
        yield lambda: sympy.cancel(expr)
        yield lambda: sympy.factor(expr)
    if size <= FULL_SIMPLIFY_MAX_OPS:
        yield lambda: sympy.simplify(expr)


def simplify_bounded(expr: sympy.Expr) -> sympy.Expr:
    """The cheapest safe rewrite of ``expr`` among a fixed set of candidates (see the module docstring); the same
    expression (or one over renamed names, ``synth/renaming.py``) simplified before gives that result."""
    return _SIMPLIFIED((expr,), lambda: _simplified(expr))


def _simplified(expr: sympy.Expr) -> sympy.Expr:
    allowed = _function_kinds(expr)
    divisors = _divisors(expr)
    bases = _exponential_bases(expr)
    best, best_key = expr, None
    for index, make in enumerate(_candidates(expr, sympy.count_ops(expr))):
        try:
            # Every candidate under the limit: factor of exp(1e10 * x**2 / 19999899241) (erf(x / 1.41421)'s
            # derivative) expands a polynomial of degree 1e10 and would fill the memory.
            with _time_limit(SIMPLIFY_TIME_LIMIT_S):
                candidate = make()
        except (_OutOfTime, MemoryError, sympy.PolynomialError, NotImplementedError, TypeError, ValueError):
            continue
        if not _function_kinds(candidate) <= allowed or not _divisors(candidate) <= divisors:
            continue
        if not _exponential_bases(candidate) <= bases:
            continue
        key = (sympy.count_ops(candidate), len(str(candidate)), index)
        if best_key is None or key < best_key:
            best, best_key = candidate, key
    return best


__all__ = ["FULL_SIMPLIFY_MAX_OPS", "REWRITE_MAX_OPS", "SIMPLIFY_TIME_LIMIT_S", "simplify_bounded"]
