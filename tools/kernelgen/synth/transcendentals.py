"""Fewer transcendental calls per element: double-angle calls rewritten onto the calls a kernel makes anyway.

Simplification prefers ``sin(2u)`` to ``2 sin(u) cos(u)`` (fewer operations on paper), but a backward kernel that
also needs ``sin(u)`` and ``cos(u)`` then evaluates three transcendentals per element where two suffice, and
transcendental throughput, not memory, bounds such kernels on a GPU (snake's backward: ``sin(2 alpha x)`` beside
``sin(alpha x)`` and ``cos(alpha x)``). The expressions one kernel evaluates are rewritten together, since they
share their calls; a rewrite is kept only when the set of distinct calls shrinks, so nothing changes for a kernel
that would trade one call for another. Every identity here is exact and cancellation-free where the original is
accurate: ``sin(2u) = 2 sin(u) cos(u)`` and ``cos(2u)`` as ``2 cos(u)**2 - 1`` or ``1 - 2 sin(u)**2``, whichever
reuses a call the kernel makes. (``exp(2u) = exp(u)**2`` would qualify too, but sympy folds ``exp(u)**2`` straight
back into ``exp(2u)``.)
"""

import sympy

# Applied functions that cost a transcendental evaluation (or a special-function unit op) per element.
TRANSCENDENTAL = (sympy.sin, sympy.cos, sympy.exp, sympy.log, sympy.tanh, sympy.erf)


def transcendental_calls(exprs) -> set[sympy.Expr]:
    """The distinct transcendental calls (``sin(alpha*x)``...) the expressions ``exprs`` evaluate."""
    return {call for expr in exprs for call in sympy.preorder_traversal(expr) if isinstance(call, TRANSCENDENTAL)}


def _half_argument(call: sympy.Expr) -> sympy.Expr | None:
    """``u`` when ``call`` is ``f(2*u)`` (a literal factor 2 in the argument), else None."""
    coefficient, rest = call.args[0].as_coeff_Mul()
    if coefficient.is_Number and coefficient % 2 == 0 and coefficient != 0:
        return coefficient / 2 * rest
    return None


def _expansions(call: sympy.Expr, u: sympy.Expr) -> list[sympy.Expr]:
    if isinstance(call, sympy.sin):
        return [2 * sympy.sin(u) * sympy.cos(u)]
    if isinstance(call, sympy.cos):
        return [2 * sympy.cos(u) ** 2 - 1, 1 - 2 * sympy.sin(u) ** 2]
    return []


def share_transcendentals(exprs: dict[str, sympy.Expr]) -> dict[str, sympy.Expr]:
    """``exprs`` (name -> expression, evaluated by one kernel) with double-angle calls rewritten onto calls the
    kernel already makes, while that lowers the number of distinct transcendental calls."""
    current = dict(exprs)
    while (rewritten := _one_call_fewer(current)) is not None:  # each rewrite removes a call, so this ends
        current = rewritten
    return current


def _one_call_fewer(exprs: dict[str, sympy.Expr]) -> dict[str, sympy.Expr] | None:
    """The first double-angle rewrite (in a fixed order) that leaves ``exprs`` with fewer distinct calls."""
    calls = transcendental_calls(exprs.values())
    for call in sorted(calls, key=sympy.default_sort_key):
        u = _half_argument(call)
        for expansion in _expansions(call, u) if u is not None else []:
            trial = {name: expr.xreplace({call: expansion}) for name, expr in exprs.items()}
            if len(transcendental_calls(trial.values())) < len(calls):
                return trial
    return None


__all__ = ["TRANSCENDENTAL", "share_transcendentals", "transcendental_calls"]
