"""A row at which an expression of a row program is not 0: a witness that no exact-zero check can succeed.

``rows.py`` proves exact zeros symbolically (expanded, put over a common denominator, simplified, row sums merged over
a shared divisor): each step shows that the expression is 0 for every row, that is every value of the inputs,
parameters and hyper-parameters, with each statistic what its definition makes of them and a row sum the sum over
the row's columns. At one such row where the expression is not 0 every check must fail, and most expressions tested
are not 0: the checks cost far more than evaluating the expression at a row. The rows here are drawn at random
(``COLUMNS`` columns, values in [0.5, 1.5], 30 digits, two rows) with their statistics computed from the definitions.

The answer is "not 0" only where the value at both rows is far from rounding: a name of no known role, a function
without a numeric value, a pole or a value within rounding of 0 leave the decision to the symbolic checks.
"""

from __future__ import annotations

import random

import sympy

COLUMNS = 3
_DIGITS = 30
_SEEDS = (0, 1)
# A value this small against the expression's largest term is rounding (30 digits leave 15 for cancellation).
_RELATIVE_ROUNDING = sympy.Float("1e-15")
_REDUCTIONS = {
    "sum": sum,
    "mean": lambda values: sum(values) / COLUMNS,
    "max": max,
    "min": min,
}


class RowWitness:
    """Rows of one program: ``statistics`` ``(symbol, reduce, operand)`` in order, ``per_column`` the symbols with a
    value per column (inputs, channel parameters, gradients of per-element outputs), ``per_row`` those with one value
    per row, ``n`` the row length, ``equal`` symbols standing for a statistic's value (``{name}_recomputed``) and
    ``row_sum`` the marker class of a sum over the columns of its argument."""

    def __init__(self, statistics, per_column, per_row, n, equal, row_sum) -> None:
        self._row_sum = row_sum
        self._rows = [_drawn_row(statistics, per_column, per_row, n, equal, random.Random(seed)) for seed in _SEEDS]

    def shows_nonzero(self, expr: sympy.Expr) -> bool:
        """Whether ``expr`` is not 0 at each row (False: undecided)."""
        if expr.has(sympy.Derivative, sympy.Subs, sympy.Integral):
            return False  # numeric values of these are approximations
        return all(row is not None and _clearly_nonzero(self._value_at(expr, *row)) for row in self._rows)

    def _value_at(self, expr, values: dict, columns: list[dict]) -> tuple | None:
        sums = {}
        for atom in expr.atoms(self._row_sum):
            column_values = [_number(atom.args[0], {**values, **column}) for column in columns]
            if None in column_values:
                return None
            sums[atom] = sum(column_values)
        terms = [_number(term, values) for term in sympy.Add.make_args(expr.xreplace(sums))]
        if None in terms:
            return None
        return sum(terms), max(abs(term) for term in terms)


def _drawn_row(statistics, per_column, per_row, n, equal, generator: random.Random):
    """(per-row values, per-column values) of one random row, its statistics computed; None where one has no value."""

    def draw():
        return sympy.Float(generator.uniform(0.5, 1.5), _DIGITS)

    values = {n: sympy.Integer(COLUMNS)}
    for symbol in sorted(per_row, key=lambda s: s.name):
        values[symbol] = draw()
    columns = [{} for _ in range(COLUMNS)]
    for symbol in sorted(per_column, key=lambda s: s.name):
        for column in columns:
            column[symbol] = draw()
    for symbol, reduce, operand in statistics:
        column_values = [_number(operand, {**values, **column}) for column in columns]
        if None in column_values:
            return None
        values[symbol] = _REDUCTIONS[reduce](column_values)
    for symbol, statistic in equal.items():
        values[symbol] = values[statistic]
    return values, columns


def _number(expr: sympy.Expr, values: dict) -> sympy.Float | None:
    """``expr`` at ``values`` as a finite real number, else None (a name without a value included)."""
    if not expr.free_symbols <= values.keys():
        return None
    value = expr.xreplace(values)
    if not value.is_Number:
        value = value.evalf(_DIGITS)
    return value if value.is_Number and value.is_finite and value.is_real else None


def _clearly_nonzero(value: tuple | None) -> bool:
    if value is None:
        return False
    total, largest = value
    return abs(total) > _RELATIVE_ROUNDING * largest


__all__ = ["COLUMNS", "RowWitness"]
