"""A random row at which an expression of a row program is not 0 (``synth/row_witness.py``): it answers "not 0" only
for expressions that are not 0, and leaves exact zeros, and what it cannot evaluate, to the symbolic checks."""

import sympy

from tools.kernelgen.synth.functions import LogAddExp
from tools.kernelgen.synth.functions import Sigmoid
from tools.kernelgen.synth.functions import indicator
from tools.kernelgen.synth.row_witness import COLUMNS
from tools.kernelgen.synth.row_witness import RowWitness
from tools.kernelgen.synth.rows import RowSum
from tools.kernelgen.synth.rows import recomputed_symbol

X, W, GRAD, BETA, N, M, S, MEAN = (
    sympy.Symbol(name, real=True) for name in ("x", "w", "grad_y", "beta", "n_cols", "m", "s", "mean")
)
M_RECOMPUTED = recomputed_symbol("m")


def _softmax_rows() -> RowWitness:
    """Rows of x (per column) with m = max(x), s = sum(exp(x - m)), mean = mean(x ** 2); w per column, beta and
    grad_y per row."""
    statistics = [(M, "max", X), (S, "sum", sympy.exp(X - M)), (MEAN, "mean", X**2)]
    return RowWitness(statistics, {X, W}, {GRAD, BETA}, N, {M_RECOMPUTED: M}, RowSum)


def test_an_expression_that_is_not_0_is_shown_so():
    rows = _softmax_rows()
    assert rows.shows_nonzero(GRAD * RowSum(X * W))
    assert rows.shows_nonzero(RowSum(X) - N * MEAN)  # mean is of x ** 2, not of x
    assert rows.shows_nonzero(BETA * RowSum(Sigmoid(X)) - 1)  # a function of kernelgen's own, by its value


def test_exact_zeros_by_the_statistics_definitions_are_left_to_the_symbolic_checks():
    rows = _softmax_rows()
    assert not rows.shows_nonzero(RowSum(X**2) - N * MEAN)
    assert not rows.shows_nonzero(GRAD * RowSum(sympy.exp(X - M)) / S - GRAD)  # a softmax sums to 1
    assert not rows.shows_nonzero(RowSum(indicator(sympy.Eq(X, M_RECOMPUTED))) - 1)  # one column is the maximum
    assert rows.shows_nonzero(RowSum(indicator(sympy.Eq(X, M_RECOMPUTED))) - 2)
    assert not rows.shows_nonzero(N - COLUMNS)


def test_what_it_cannot_evaluate_is_left_undecided():
    rows = _softmax_rows()
    unknown = sympy.Symbol("z", real=True)
    assert not rows.shows_nonzero(unknown * RowSum(X))  # a name of no known role
    assert not rows.shows_nonzero(sympy.log(RowSum(X - M)))  # log of a sum <= 0 is no finite real
    assert not rows.shows_nonzero(sympy.Derivative(sympy.Function("f")(X), X) + GRAD)


def test_a_function_of_values_that_are_not_real_has_no_value():
    """A skew JSD's ``logaddexp(x + log(1 - beta), w + log(beta))`` at a drawn beta above 1 has a complex argument,
    which logaddexp's max cannot compare: no value (the row is no evidence), not a ValueError out of sympy."""
    value = LogAddExp(sympy.Float(0.5) + sympy.log(-0.5), sympy.Float(1.0)).evalf()
    assert not value.is_Number
