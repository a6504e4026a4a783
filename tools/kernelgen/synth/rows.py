"""Derive a row program (tier 2): element-wise math plus reductions along each row's last dimension.

A row program is a list of *statistics* (``name = reduce(operand)`` over the columns of a row, ``reduce`` one of
sum, mean, max, min) and *outputs* (formulas over the inputs, parameters, hyper-parameters, ``n_cols`` and the
statistics). Every value has a shape class relative to a ``[rows, cols]`` tile: per element (the inputs), per
column (channel parameters), per row (statistics and what is computed from them alone) or scalar.

Reverse mode runs over it with the statistics as symbols of their own: an output's dependence on an input is
``sympy.diff`` with the statistics held fixed, plus, for each statistic ``s``, its adjoint times the derivative of
its operand: a broadcast's adjoint is a row sum, a row sum's adjoint a broadcast, and a max (or min) passes its
adjoint to the elements equal to it, split evenly between ties as ``torch.amax`` does. Each row sum of the backward
is a reduction of its own; statistics feeding later statistics (a mean inside a variance, the max inside a
logsumexp) pass their adjoints on the same way.

Exact zeros are shown, not assumed: a term of an adjoint (or the whole adjoint) is dropped when, with every row sum
written out as a linear combination of row sums of monomials and each statistic's own definition substituted, it
simplifies to 0. The shift of a softmax by its maximum and the mean inside a centred variance drop out this way,
whatever names or spellings the reference used.

The same program also splits into passes for rows whose columns are spread over ranks (a DTensor sharded along
its last dim): a statistic is then a local partial reduction plus an all-reduce over the ranks (sum for sums and
means, which divide by the whole row's ``n_cols``; max; min), and a statistic whose operand reads another one
(the mean inside a variance, the max inside a softmax's sum) can only start once that one is all-reduced. The
passes follow from that dependency order alone: pass k computes the reductions that wait for k all-reduces, the
last pass the outputs (or gradients) from the all-reduced values; the backward's row sums are split the same way.

Printed statements follow the tier-2 template's conventions: a tile is ``[BLOCK_ROWS, BLOCK_COLS]`` with ``mask``
marking the real elements; a reduction is ``tl.sum(tl.where(mask, operand, 0.0), axis=1, keep_dims=True)`` (the
identity of the reduction, not the load's padding, fills the masked lanes: -inf for max, +inf for min), so
per-row values are ``[BLOCK_ROWS, 1]`` and broadcast against the tile (a loss program walks one row in 1-D chunks
of ``BLOCK_SIZE``: its reductions are scalars, ``one_row``). The fused kernels drop the ``tl.where`` of a
reduction whose operand is shown (by substitution) to be its identity at the values the loads give masked lanes,
and the forward's loads give an input the fill (0 or -inf) that does this for most of its statistics: a softmax
loads x with -inf, and its max of x and sum of exp(x - max) need no ``tl.where`` (on an H200, 258 -> 250 us at
16384 x 14336 bf16); the backward's loads fill 0, which masks every row sum of a product with the upstream gradient.
"""

from __future__ import annotations

import itertools
import re

from dataclasses import dataclass
from dataclasses import field

import sympy

from tools.kernelgen.synth.derive import _precision_sensitive_ops
from tools.kernelgen.synth.derive import tidy_derivative
from tools.kernelgen.synth.derive import with_accurate_forms
from tools.kernelgen.synth.functions import Root
from tools.kernelgen.synth.functions import Sigmoid
from tools.kernelgen.synth.functions import indicator
from tools.kernelgen.synth.functions import select
from tools.kernelgen.synth.naming import constant_lines
from tools.kernelgen.synth.naming import hoist
from tools.kernelgen.synth.printer import ROW_LENGTH
from tools.kernelgen.synth.printer import TritonPrinter
from tools.kernelgen.synth.printer import format_formula
from tools.kernelgen.synth.printer import print_triton
from tools.kernelgen.synth.renaming import RenamingMemo
from tools.kernelgen.synth.row_witness import RowWitness
from tools.kernelgen.synth.simplify import simplify_bounded
from tools.kernelgen.synth.symbols import make_symbols

REDUCE_KINDS = ("sum", "mean", "max", "min")
N_COLS = ROW_LENGTH
# The column index of an element (``col`` in formulas): a tier-2 tile's ``cols``, a loss chunk's ``col``. A row's
# ``x.max(dim).values`` reads it, whose gradient goes to the first column holding the maximum, as torch's does.
COL = "col"
_TILE_COLUMNS = "cols"
_IDENTITY = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}
_TL_REDUCE = {"sum": "tl.sum", "mean": "tl.sum", "max": "tl.max", "min": "tl.min"}
_IDENTITY_VALUES = {"sum": sympy.S.Zero, "mean": sympy.S.Zero, "max": -sympy.oo, "min": sympy.oo}
_FILLS = (sympy.S.Zero, -sympy.oo)  # what a forward load may give masked lanes, in order of preference
_MAX_FILL_CHOICES = 4  # inputs beyond which every load fills 0 (the choices grow as 2 ** inputs)
_FILL_LITERALS = {sympy.S.Zero: "0.0", -sympy.oo: 'float("-inf")'}
# Expansions larger than this skip the exact-zero check (the term is then computed, which is correct, only slower).
_MAX_LINEAR_TERMS = 400
_MAX_CANCEL_OPS = 400  # the largest candidate zero put over a common denominator
# Adjoints by program (each a few kilobytes), kept for the programs a process derives again over other names.
_ADJOINTS = RenamingMemo(kept=1024)


class RowSum(sympy.Function):
    """Sum over the columns of one row (a marker: never printed, replaced by a reduction statement)."""

    nargs = 1


@dataclass(frozen=True)
class StatisticSpec:
    name: str
    reduce: str
    operand: sympy.Expr


@dataclass(frozen=True)
class RowPass:
    """One kernel of a row program whose columns are split over ranks. A reduction pass computes ``reductions``
    from this rank's columns, stored one fp32 value per row, which the host all-reduces before the next pass reads
    them; the last pass (no reductions) computes the outputs or gradients."""

    lines: list[str]
    reads: list[str]  # names the lines read but do not define (inputs, parameters, earlier per-row values)
    reductions: list[tuple[str, str]]  # (name, reduce kind) in order


@dataclass
class RowMath:
    """The printed forward and backward of a row program, and what each reads (see the module docstring)."""

    forward: list[str]
    backward: list[str]
    saved: list[str]  # statistics the forward stores (fp32, one per row) and the backward loads
    forward_reads: list[str]
    backward_reads: list[str]
    row_outputs: list[str]  # outputs with one value per row ([rows, 1] in the tile)
    row_gradients: list[str]  # grad_{parameter} of scalar parameters: one value per row, summed by the template
    gradient_formulas: dict[str, str] = field(default_factory=dict)
    precision_sensitive_ops: list[str] = field(default_factory=list)
    zero_adjoints: list[str] = field(default_factory=list)  # statistics whose gradient is exactly 0
    # grad_{input} -> the grad_{input} it equals (x + residual feeding everything): one buffer serves both.
    gradient_aliases: dict[str, str] = field(default_factory=dict)
    # Per-element outputs the backward reads instead of recomputing them (saved like inputs: a softmax's y).
    reused_outputs: list[str] = field(default_factory=list)
    # The value the fused forward's loads give masked lanes, per input that is not filled with 0 (printed): the
    # fill that makes most reductions' operands their identity there, whose tl.where then goes (softmax: -inf).
    forward_fills: dict[str, str] = field(default_factory=dict)
    # The same forward and backward for columns split over ranks: reduction passes, then the outputs' pass.
    split_forward: list[RowPass] = field(default_factory=list)
    split_backward: list[RowPass] = field(default_factory=list)


class RowProgramError(ValueError):
    """A row program kernelgen cannot derive; the message names the statistic or output."""


def synthesize_rows(
    statistics: list[tuple[str, str, sympy.Expr]],
    outputs: dict[str, sympy.Expr],
    inputs: list[str],
    parameters: dict[str, str] | None = None,
    hyperparameters: list[str] | None = None,
    constants: list[str] | None = None,
    row_inputs: list[str] | None = None,
) -> RowMath:
    """Forward and backward statements of a row program.

    ``statistics``: ``(name, reduce, operand)`` in order, each operand over the names declared before it;
    ``outputs``: name -> expression; ``inputs``: per-element tensors that get a gradient; ``constants``:
    per-element tensors that do not; ``parameters``: name -> ``channel`` or ``scalar``; ``hyperparameters``:
    scalars; ``row_inputs``: one value per row (class targets). ``n_cols`` (the row length) may appear anywhere.
    """
    program = _Program(
        statistics, outputs, inputs, parameters or {}, hyperparameters or [], constants or [], row_inputs or []
    )
    return program.derive()


class _Program:
    def __init__(self, statistics, outputs, inputs, parameters, hyperparameters, constants, row_inputs=()):
        stat_names = [name for name, _, _ in statistics]
        declared = [*inputs, *constants, *row_inputs, *parameters, *hyperparameters, *stat_names, N_COLS]
        if COL not in declared:  # (a loss declares it among its constants)
            declared.append(COL)
        self.symbols = make_symbols(declared)
        clashes = sorted(set(outputs) & set(declared))
        if clashes:
            raise RowProgramError(f"names {clashes} are used both as outputs and as inputs or statistics")
        self.n = self.symbols[N_COLS]
        self.aliases: dict[str, str] = {}
        self.inputs = list(inputs)
        self.parameters = dict(parameters)
        self.element = {self.symbols[name] for name in [*inputs, *constants]}
        # Varies along the row like an input, but is no tensor: never loaded, and in masked lanes not what a load
        # gives them, so no proof that a reduction's tl.where can go may assume a value for it there.
        self.column = self.symbols[COL]
        self.channel = {self.symbols[name] for name, kind in parameters.items() if kind == "channel"}
        self.stat_symbols = {self.symbols[name] for name in stat_names}
        # One value per row given with the inputs (class targets): row-constant, never differentiated.
        self.row_inputs = {self.symbols[name] for name in row_inputs}
        self.statistics: list[StatisticSpec] = []
        for name, reduce, operand in statistics:
            if reduce not in REDUCE_KINDS:
                raise RowProgramError(f"statistic {name!r}: reduce {reduce!r} is not one of {', '.join(REDUCE_KINDS)}")
            operand = self._bind(operand, f"statistic {name!r}")
            if self.shape_class(operand) != "element":
                raise RowProgramError(
                    f"statistic {name!r} reduces {operand}, which does not vary along the row: reduce a per-element "
                    f"value"
                )
            self.statistics.append(StatisticSpec(name, reduce, operand))
        self.outputs = {}
        for name, expr in outputs.items():
            expr = simplify_bounded(self._bind(expr, f"output {name!r}"))
            if self.shape_class(expr) == "scalar":
                raise RowProgramError(f"output {name!r} = {expr} depends on no row; it must read an input")
            self.outputs[name] = expr
        self.grad_symbols = {name: sympy.Symbol(f"grad_{name}", real=True) for name in self.outputs}
        self.row_outputs = [name for name, expr in self.outputs.items() if self.shape_class(expr) == "row"]
        # The backward's per-element values: inputs, channel parameters and the gradients of per-element outputs.
        self.varying = self.element | self.channel | {self.column}
        self.varying |= {self.grad_symbols[name] for name in self.outputs if name not in self.row_outputs}

    # Classes ------------------------------------------------------------------------------------------------
    def _bind(self, expr, what: str) -> sympy.Expr:
        expr = sympy.sympify(expr)
        unknown = sorted(s.name for s in expr.free_symbols if s.name not in self.symbols)
        if unknown:
            raise RowProgramError(f"{what} reads undeclared names {unknown}")
        return expr.xreplace({s: self.symbols[s.name] for s in expr.free_symbols})

    def shape_class(self, expr: sympy.Expr) -> str:
        free = expr.free_symbols
        if free & (self.element | self.channel | {self.column}):
            return "element"
        if free & (self.stat_symbols | self.row_inputs):
            return "row"
        return "scalar"

    def _row_constant(self, expr: sympy.Expr) -> bool:
        return not (expr.free_symbols & self.varying)

    # Derivation ----------------------------------------------------------------------------------------------
    def _weight(self, statistic: StatisticSpec):
        """How a statistic's adjoint reaches each element of its operand: 1 for a sum, 1/n for a mean, the even
        split between the elements equal to the extremum for max and min."""
        if statistic.reduce == "sum":
            return sympy.S.One
        if statistic.reduce == "mean":
            return 1 / self.n
        # Recomputed in the backward from the same operand, so the equality is exact there.
        extremum = recomputed_symbol(statistic.name)
        hit = indicator(sympy.Eq(statistic.operand, extremum))
        return hit / RowSum(hit)

    def _adjoints(self) -> tuple[dict[str, sympy.Expr], list[str]]:
        """Each statistic's adjoint (a per-row value), latest statistic first. In the returned expressions a later
        statistic's adjoint appears as the symbol ``adjoint_symbol(name)``; exact zeros are tested on the written-out
        form, because cancellations (the max of a softmax) happen between a term and a later adjoint. Taken from an
        earlier derivation of the same program over other names where there is one (``synth/renaming.py``)."""
        program = (
            tuple((s.name, s.reduce, s.operand) for s in self.statistics),
            tuple(self.outputs.items()),
            frozenset(self.element),
            frozenset(self.channel),
            frozenset(self.row_inputs),
        )
        symbolic, zeros, written = _ADJOINTS(program, self._derived_adjoints)
        self.written_adjoints = dict(written)  # each adjoint written out (losses merge row sums over it)
        return dict(symbolic), list(zeros)

    def _derived_adjoints(self) -> tuple[dict[str, sympy.Expr], list[str], dict[str, sympy.Expr]]:
        full: dict[str, sympy.Expr] = {}
        symbolic: dict[str, sympy.Expr] = {}
        # Written out as ``full`` but differentiated by the chain rule through piecewise math (``chain_derivative``):
        # the max shift of a picked log-probability fed to a clipped ratio cancels there and not in sympy's form.
        chained: dict[str, sympy.Expr] = {}
        zeros = []
        for index in reversed(range(len(self.statistics))):
            statistic = self.statistics[index]
            symbol = self.symbols[statistic.name]
            terms: list[tuple[sympy.Expr, sympy.Expr, sympy.Expr]] = []  # (written out, with symbols, chained)
            for name, expr in self.outputs.items():
                derivative = tidy_derivative(sympy.diff(expr, symbol))
                if derivative == 0:
                    continue
                contribution = self.grad_symbols[name] * derivative
                term = contribution if name in self.row_outputs else RowSum(contribution)
                chain = self.grad_symbols[name] * tidy_derivative(chain_derivative(expr, symbol))
                terms.append((term, term, chain if name in self.row_outputs else RowSum(chain)))
            for later in self.statistics[index + 1 :]:
                if full[later.name] == 0:  # (a sum only the gradient reads: its operand need not be differentiable)
                    continue
                derivative = tidy_derivative(sympy.diff(later.operand, symbol))
                if derivative == 0:
                    continue
                passed = RowSum(self._weight(later) * derivative)
                named = adjoint_symbol(later.name) * passed
                chain = RowSum(self._weight(later) * tidy_derivative(chain_derivative(later.operand, symbol)))
                terms.append((full[later.name] * passed, named, chained[later.name] * chain))
            terms = [term for term in terms if not self._is_zero(term[0])]
            written_total = sympy.Add(*(written for written, _, _ in terms))
            chained_total = sympy.Add(*(chain for _, _, chain in terms))
            # A single term is its own total, just shown not to be 0.
            if (
                not terms
                or (len(terms) > 1 and self._is_zero(written_total))
                or (chained_total != written_total and self._is_zero(chained_total))
            ):
                zeros.append(statistic.name)
                full[statistic.name] = symbolic[statistic.name] = chained[statistic.name] = sympy.S.Zero
            else:
                full[statistic.name] = written_total
                symbolic[statistic.name] = sympy.Add(*(named for _, named, _ in terms))
                chained[statistic.name] = chained_total
        return symbolic, sorted(zeros), full

    def _gradient(self, name: str, adjoints: dict[str, sympy.Expr], per_row: bool) -> sympy.Expr:
        """d(loss)/d(name): per element (inputs, channel parameters) or per row (scalar parameters)."""
        symbol = self.symbols[name]
        terms = []
        for output, expr in self.outputs.items():
            derivative = tidy_derivative(sympy.diff(expr, symbol))
            if derivative == 0:
                continue
            contribution = self.grad_symbols[output] * derivative
            terms.append(RowSum(contribution) if per_row and output not in self.row_outputs else contribution)
        for statistic in self.statistics:
            if adjoints[statistic.name] == 0:
                continue
            derivative = tidy_derivative(sympy.diff(statistic.operand, symbol))
            if derivative == 0:
                continue
            contribution = self._weight(statistic) * derivative
            terms.append(adjoint_symbol(statistic.name) * (RowSum(contribution) if per_row else contribution))
        return sympy.Add(*terms)

    # Exact zeros -------------------------------------------------------------------------------------------
    def _linear(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr`` with each row sum written as row-constant coefficients times row sums of monomials."""
        return expr.replace(lambda node: isinstance(node, RowSum), lambda node: self._linear_sum(node.args[0]))

    def _linear_sum(self, operand: sympy.Expr) -> sympy.Expr:
        total = sympy.S.Zero
        for constant, varying in self._linear_terms(operand):
            total += constant * (self.n if varying == 1 else RowSum(varying))
        return total

    def _linear_terms(self, operand: sympy.Expr) -> list[tuple[sympy.Expr, sympy.Expr]]:
        """``operand`` as (row-constant coefficient, varying monomial) pairs. A ``where(c, a, 0)`` factor is
        distributed over the terms of ``a`` with their coefficients taken out, so ``where(c, -2 * e, 0)`` and
        ``where(c, e, 0)`` are multiples of one row sum."""
        expanded = sympy.expand(operand, power_exp=True, log=False)
        terms = sympy.Add.make_args(expanded)
        if len(terms) > _MAX_LINEAR_TERMS:
            raise _TooLarge
        pairs = []
        for term in terms:
            constant, varying = sympy.S.One, []
            for factor in sympy.Mul.make_args(term):
                if self._row_constant(factor):
                    constant *= factor
                else:
                    varying.append(factor)
            gated = [f for f in varying if _zero_default(f)]
            if len(gated) == 1 and (gated[0].args[0].expr.is_Add or gated[0].args[0].expr.is_Mul):
                (value, condition), _ = gated[0].args
                rest = sympy.Mul(*(f for f in varying if f is not gated[0]))
                for inner, part in self._linear_terms(value * rest):
                    pairs.append((constant * inner, sympy.Piecewise((part, condition), (0, True))))
                continue
            pairs.append((constant, sympy.Mul(*varying)))
        return pairs

    def _definitions(self) -> dict[sympy.Expr, sympy.Expr]:
        """Row sums that a sum or mean statistic defines alone: ``RowSum(x) -> n_cols * mean`` and the like."""
        if hasattr(self, "_known"):
            return self._known
        known: dict[sympy.Expr, sympy.Expr] = {}
        for statistic in self.statistics:
            if statistic.reduce not in ("sum", "mean"):
                continue
            value = self.symbols[statistic.name] * (self.n if statistic.reduce == "mean" else 1)
            try:
                linear = self._substitute(self._linear_sum(statistic.operand), known)
            except _TooLarge:
                continue
            atoms = sorted(linear.atoms(RowSum), key=sympy.default_sort_key)
            if len(atoms) != 1:
                continue
            (atom,) = atoms
            coefficient = sympy.expand(linear).coeff(atom)
            if coefficient == 0 or coefficient.has(RowSum):
                continue
            rest = sympy.expand(linear - coefficient * atom)
            if rest.has(atom):
                continue
            known[atom] = (value - rest) / coefficient
        self._known = known
        return known

    def _known_sum(self, operand: sympy.Expr) -> sympy.Expr | None:
        """``RowSum(operand)`` written with statistics alone, when their definitions say what it is."""
        try:
            linear = self._substitute(self._linear_sum(operand), self._definitions())
        except _TooLarge:
            return None
        return None if linear.has(RowSum) else sympy.powsimp(linear)

    @staticmethod
    def _substitute(expr: sympy.Expr, known: dict[sympy.Expr, sympy.Expr]) -> sympy.Expr:
        for _ in range(8):
            replaced = expr.xreplace(known)
            if replaced == expr:
                return expr
            expr = replaced
        return expr

    def _is_zero(self, expr: sympy.Expr) -> bool:
        try:
            linear = self._substitute(self._linear(expr), self._definitions())
        except _TooLarge:
            return False
        reduced = sympy.expand(sympy.powsimp(sympy.expand(linear, power_exp=True)))
        if reduced == 0:
            return True
        witness = self._witness()
        if witness is not None and witness.shows_nonzero(reduced):  # every check below would fail
            return False
        size = sympy.count_ops(reduced)
        # Over a common denominator: the terms of a softmax's shift that cancel through a power or a quotient of the
        # loss (a focal loss's (1 - p) ** gamma) cancel there; simplify is the slower last resort for small ones.
        if size <= _MAX_CANCEL_OPS and sympy.cancel(reduced) == 0:
            return True
        if size <= 60 and sympy.simplify(reduced) == 0:
            return True
        merged = self.merge_over_shared_divisors(reduced)
        return merged is not None and self._is_zero(merged)

    def _witness(self) -> RowWitness | None:
        """Random rows of this program (``row_witness.py``), drawn once; None where a recomputed extremum's name is
        one of the program's own (its value would be ambiguous)."""
        if not hasattr(self, "_rows_drawn"):
            equal = {
                recomputed_symbol(s.name): self.symbols[s.name] for s in self.statistics if s.reduce in ("max", "min")
            }
            per_row = {s for s in [*self.symbols.values(), *self.grad_symbols.values()] if s not in self.varying}
            per_row -= self.stat_symbols | {self.n}
            statistics = [(self.symbols[s.name], s.reduce, s.operand) for s in self.statistics]
            clash = equal.keys() & {*self.symbols.values(), *self.grad_symbols.values()}
            self._rows_drawn = None if clash else RowWitness(statistics, self.varying, per_row, self.n, equal, RowSum)
        return self._rows_drawn

    def _same_up_to_row_constant(self, a: sympy.Expr, b: sympy.Expr) -> bool:
        """Whether per-element sums ``a`` and ``b`` differ by a row-constant factor only."""
        ratio = sympy.cancel(sympy.together(sympy.powsimp(sympy.expand(a / b, power_exp=True))))
        return self._row_constant(ratio)

    def merge_over_shared_divisors(self, linear: sympy.Expr) -> sympy.Expr | None:
        """``linear`` (row-constant coefficients times row sums) with the row sums whose monomials divide by one
        per-element sum (up to a row-constant factor) added into one, put over that sum and cancelled, the
        statistics' definitions substituted; None where no two share one or nothing cancels. Such sums can be known
        together where neither is alone: JSD's mixture m = (p + q) / 2 gives RowSum(p * p / m) and RowSum(p * q / m),
        whose sum is RowSum(2 * p), a sum the statistics define (the shift of its softmaxes then cancels). The mixture
        written ``logaddexp(s, t)`` has no divisor: its derivative ``sigmoid(s - t)`` is tried as ``exp(s) / (exp(s)
        + exp(t))`` where nothing merges as written."""
        merged = self._merged_over_divisors(sympy.expand(linear))
        if merged is None and linear.has(Sigmoid):
            as_ratios = linear.replace(
                lambda node: isinstance(node, RowSum),
                lambda node: RowSum(node.args[0].replace(lambda f: isinstance(f, Sigmoid), self._sigmoid_as_ratio)),
            )
            merged = self._merged_over_divisors(sympy.expand(as_ratios))
        return merged

    def _sigmoid_as_ratio(self, sigmoid: Sigmoid) -> sympy.Expr:
        """``sigmoid(s - t)`` as ``exp(s) / (exp(s) + exp(t))``, where ``s`` and ``t`` each gather the terms of one
        element and of the statistics computed from it (``a - a_max - log(a_sum)``: a log-softmax, so that every
        exponential stays shifted); the sigmoid as it is where the terms do not part so."""
        sides: dict[frozenset, sympy.Expr] = {}
        for term in sympy.Add.make_args(sigmoid.args[0]):
            owner = self._element_of(term)
            if owner is None:
                return sigmoid
            sides[owner] = sides.get(owner, sympy.S.Zero) + term
        if len(sides) != 2:
            return sigmoid
        first, second = sides.values()
        # The element's own term gives each side its sign: s enters positively, t negatively.
        if self._element_sign(first) < 0:
            first, second = second, first
        if self._element_sign(first) < 0 or self._element_sign(second) > 0:
            return sigmoid
        return sympy.exp(first) / (sympy.exp(first) + sympy.exp(-second))

    def _element_of(self, term: sympy.Expr) -> frozenset | None:
        """The per-element symbols ``term`` reads, itself or through the statistics it reads (``log(a_sum)``: a);
        None where that is none or ambiguous."""
        owners: set = set()
        pending, seen = list(term.free_symbols), set()
        while pending:
            symbol = pending.pop()
            if symbol in seen:
                continue
            seen.add(symbol)
            if symbol in self.varying:
                owners.add(symbol)
            statistic = next((st for st in self.statistics if self.symbols.get(st.name) == symbol), None)
            if statistic is not None:
                pending.extend(sympy.sympify(statistic.operand).free_symbols)
        return frozenset(owners) if owners and not {self.column} & owners else None

    def _element_sign(self, side: sympy.Expr) -> int:
        """+1 or -1: the sign of the one term of ``side`` that reads a per-element symbol itself; 0 otherwise."""
        terms = [term for term in sympy.Add.make_args(side) if term.free_symbols & self.varying]
        if len(terms) != 1:
            return 0
        return -1 if terms[0].could_extract_minus_sign() else 1

    def _merged_over_divisors(self, expanded: sympy.Expr) -> sympy.Expr | None:
        groups: list[tuple[sympy.Expr, list[sympy.Expr]]] = []  # (a divisor, the row sums dividing by it)
        for atom in sorted(expanded.atoms(RowSum), key=sympy.default_sort_key):
            for factor in sympy.Mul.make_args(atom.args[0]):
                if factor.is_Pow and factor.exp.is_negative and factor.base.is_Add:
                    if self._row_constant(factor.base):
                        continue
                    group = next((g for g in groups if self._same_up_to_row_constant(factor.base, g[0])), None)
                    if group is None:
                        groups.append((factor.base, [atom]))
                    elif atom not in group[1]:
                        group[1].append(atom)
        for _, atoms in groups:
            if len(atoms) < 2:
                continue
            coefficients = [expanded.coeff(atom) for atom in atoms]
            if any(c == 0 or c.has(RowSum) for c in coefficients):
                continue
            terms = [c * a.args[0] for c, a in zip(coefficients, atoms)]
            combined = sympy.cancel(sympy.together(sympy.Add(*terms)))
            if sympy.count_ops(combined) >= sum(sympy.count_ops(t) for t in terms):
                continue  # nothing cancelled over the shared sum
            rest = expanded - sum(c * a for c, a in zip(coefficients, atoms))
            try:
                return _collected_row_sums(self._substitute(rest + self._linear_sum(combined), self._definitions()))
            except _TooLarge:
                return None
        return None

    # Printing ----------------------------------------------------------------------------------------------
    def derive(self) -> RowMath:
        adjoints, zeros = self._adjoints()
        taken = {str(s) for s in self.symbols} | set(self.outputs) | {str(s) for s in self.grad_symbols.values()}
        gradient_names = [f"grad_{name}" for name in [*self.inputs, *self.parameters]]
        taken |= set(gradient_names) | {_TILE_COLUMNS}

        forward_items = [(s.name, s.reduce, s.operand) for s in self.statistics]
        forward_items += [(name, "value", expr) for name, expr in self.outputs.items()]
        forward_items = self._extrema_at_first(forward_items, zeros)
        forward_taken = set(taken)
        fills = self._forward_fills()
        forward_masked = {**fills, **{symbol: sympy.S.Zero for symbol in self.channel}}
        forward = _schedule(self._hoisted(self._in_tile(forward_items), taken), taken, masked=forward_masked)

        backward_items, formulas, reused = self._cheapest_backward(adjoints, taken)
        backward_taken = set(taken)
        # The backward loads every per-element value with 0 in masked lanes (inputs, reused outputs, gradients).
        backward_masked = {symbol: sympy.S.Zero for symbol in self.varying - {self.column}}
        backward = _schedule(self._hoisted(self._in_tile(backward_items), taken), taken, masked=backward_masked)
        defined = {name for name, _, _ in backward_items}
        reads = {s.name for _, _, expr in backward_items for s in expr.free_symbols} - defined
        saved = [s.name for s in self.statistics if s.name in reads]
        forward_reads = {s.name for _, _, expr in forward_items for s in expr.free_symbols}
        forward_reads -= {s.name for s in self.statistics} | {N_COLS, COL}
        every = [expr for _, _, expr in forward_items + backward_items]
        return RowMath(
            forward=forward,
            backward=backward,
            saved=saved,
            forward_reads=sorted(forward_reads),
            backward_reads=sorted(reads - {N_COLS, COL}),
            row_outputs=list(self.row_outputs),
            row_gradients=[f"grad_{name}" for name, kind in self.parameters.items() if kind == "scalar"],
            gradient_formulas=formulas,
            precision_sensitive_ops=_precision_sensitive_ops(every),
            zero_adjoints=zeros,
            gradient_aliases=dict(self.aliases),
            reused_outputs=reused,
            forward_fills={symbol.name: _FILL_LITERALS[fill] for symbol, fill in fills.items() if fill != 0},
            split_forward=self._split(forward_items, forward_taken),
            # The split backward's passes load as the fused backward does (0 in masked lanes): the same proof drops
            # their reductions' tl.where (the sweep's row sums are these passes' statements).
            split_backward=self._split(backward_items, backward_taken, masked=backward_masked),
        )

    def _extrema_at_first(self, items, zeros: list[str]):
        """``items`` (the forward's) with each ``x.max(dim).values`` of no gradient computed as its maximum: the sum
        of x at the first column holding the maximum is the maximum itself, and only its gradient needs that column
        (a softmax written with ``x - x.max(-1, keepdim=True).values`` reduces once, as with amax)."""
        by_name = {s.name: s for s in self.statistics}
        replaced: dict[str, sympy.Symbol] = {}
        dropped: set[str] = set()
        for first in self.statistics:
            extremum = self._first_of(first, by_name)
            if extremum is None:
                continue
            column = self.symbols[first.name]
            picked = [
                select(sympy.Eq(*sides), extremum.operand, 0)
                for sides in [(self.column, column), (column, self.column)]
            ]
            for statistic in self.statistics:
                if statistic.reduce == "sum" and statistic.name in zeros and statistic.operand in picked:
                    replaced[statistic.name] = self.symbols[extremum.name]
                    dropped.add(first.name)
        if not replaced:
            return items
        items = [(item[0], "value", replaced[item[0]]) if item[0] in replaced else item for item in items]
        read = {s.name for _, _, expr in items for s in expr.free_symbols}
        return [item for item in items if item[0] not in dropped or item[0] in read]

    def _first_of(self, first: StatisticSpec, by_name: dict[str, StatisticSpec]) -> StatisticSpec | None:
        """The max or min statistic of which ``first`` is the first column holding it (``min(where(x == m, col,
        n_cols))``, as analysis writes x.max(dim).values), else None."""
        if first.reduce != "min" or not isinstance(first.operand, sympy.Piecewise) or len(first.operand.args) != 2:
            return None
        (column, condition), (otherwise, always) = first.operand.args
        if column != self.column or otherwise != self.n or always != sympy.true or not isinstance(condition, sympy.Eq):
            return None
        for side, other in (condition.args, condition.args[::-1]):
            extremum = by_name.get(getattr(side, "name", None))
            if extremum is not None and extremum.reduce in ("max", "min") and extremum.operand == other:
                return extremum
        return None

    def _forward_fills(self) -> dict[sympy.Symbol, sympy.Expr]:
        """The value each per-element input reads in masked lanes (the load's ``other``): 0, or -inf where that
        makes more of the statistics' operands their reduction's identity there (a softmax's max of x and sum of
        exp(x - max)), so that their ``tl.where`` can go. Channel parameters read 0 in masked columns."""
        loaded = sorted(self.element, key=lambda symbol: symbol.name)
        best, best_count = {symbol: sympy.S.Zero for symbol in loaded}, -1
        if len(loaded) > _MAX_FILL_CHOICES:
            return best
        for choice in itertools.product(_FILLS, repeat=len(loaded)):
            fills = dict(zip(loaded, choice))
            masked = {**fills, **{symbol: sympy.S.Zero for symbol in self.channel}}
            count = sum(_identity_when_masked(stat.operand, stat.reduce, masked) for stat in self.statistics)
            if count > best_count:  # the first best: 0 before -inf
                best, best_count = fills, count
        return best

    def _split(self, items, taken: set[str], masked: dict | None = None) -> list[RowPass]:
        """``items`` as passes for columns split over ranks: a reduction goes into the pass after the last
        all-reduce its operand waits for (through the values it reads too); every value item into the last pass,
        each pass recomputing the element-wise values it needs from the inputs. ``masked``: what the passes' loads
        read in masked lanes, as ``_schedule`` takes it."""
        kinds = {name: kind for name, kind, _ in items}
        exprs = {name: expr for name, _, expr in items}
        waits: dict[str, int] = {}  # name -> how many all-reduces must finish before it can be computed

        def reads(name: str) -> list[str]:
            return sorted(s.name for s in exprs[name].free_symbols if s.name in kinds)

        def wait(name: str) -> int:
            if name not in waits:
                waits[name] = max((wait(r) + (kinds[r] in REDUCE_KINDS) for r in reads(name)), default=0)
            return waits[name]

        reductions = [name for name, kind, _ in items if kind in REDUCE_KINDS]
        passes = []
        for level in range(1 + max((wait(name) for name in reductions), default=-1)):
            chosen = [name for name in reductions if wait(name) == level]
            needed, stack = set(chosen), list(chosen)
            while stack:  # the value items the chosen reductions read, not those behind another reduction
                for read in reads(stack.pop()):
                    if kinds[read] not in REDUCE_KINDS and read not in needed:
                        needed.add(read)
                        stack.append(read)
            pass_items = [item for item in items if item[0] in needed]
            passes.append(self._pass(pass_items, set(taken), [(name, kinds[name]) for name in chosen], masked))
        values = [item for item in items if item[1] not in REDUCE_KINDS]
        passes.append(self._pass(values, set(taken), [], masked))
        return passes

    def _pass(self, items, taken: set[str], reductions: list[tuple[str, str]], masked=None) -> RowPass:
        defined = {name for name, _, _ in items}
        read = {s.name for _, _, expr in items for s in expr.free_symbols} - defined - {N_COLS, COL}
        lines = _schedule(self._hoisted(self._in_tile(items), taken), taken, masked=masked)
        return RowPass(lines, sorted(read), reductions)

    def _in_tile(self, items):
        """``items`` with the column index ``col`` written as the tile's ``cols`` (the row kernels' own name)."""
        tile = {self.column: sympy.Symbol(_TILE_COLUMNS, real=True)}
        return [(name, kind, expr.xreplace(tile)) for name, kind, expr in items]

    def _hoisted(self, items, taken: set[str]):
        """``items`` with the per-row factors of per-element products gathered into one per-row value each:
        ``2 * grad_var * x / n_cols`` multiplies each element once by ``2 * grad_var / n_cols``, not three times."""
        extra: list[tuple[str, str, sympy.Expr]] = []
        names: dict[sympy.Expr, sympy.Symbol] = {}

        def gather(node):
            constant = [f for f in node.args if self._row_constant(f) and not f.is_number]
            numbers = [f for f in node.args if f.is_number]
            varying = [f for f in node.args if not self._row_constant(f)]
            if not varying or len(constant) + bool(numbers) < 2:
                return node
            factor = sympy.Mul(*numbers, *constant)
            if factor not in names:
                names[factor] = sympy.Symbol(_fresh("row_factor", taken), real=True)
                extra.append((names[factor].name, "value", factor))
            return sympy.Mul(names[factor], *varying, evaluate=False)

        rewritten = [
            (name, kind, expr.replace(lambda n: isinstance(n, sympy.Mul), gather)) for name, kind, expr in items
        ]
        return extra + rewritten

    def _cheapest_backward(self, adjoints, taken):
        """The backward's items and formulas, and the outputs it reads: written in a per-element output where that
        loads no more tensors and calls fewer functions (softmax: ``y * (dy - sum(y * dy))`` instead of recomputing
        ``exp(x - max) / sum``; the output is saved instead of the input), else in the inputs. ``taken`` gains the
        names of the version kept."""
        recomputed = self._backward_version(adjoints, taken, {})
        outputs, reuse = self._output_reuse()
        if reuse:
            self.element |= outputs  # loaded per element, like inputs
            self.varying |= outputs
            reusing = self._backward_version(adjoints, taken, reuse)
            (loads, calls), (loads_before, calls_before) = self._cost(reusing[0]), self._cost(recomputed[0])
            if (loads, calls) < (loads_before, calls_before) and loads <= loads_before and calls <= calls_before:
                items, formulas, names, self.aliases = reusing
                taken |= names
                read = {s for _, _, expr in items for s in expr.free_symbols}
                return items, formulas, sorted(s.name for s in outputs & read)
            self.element -= outputs
            self.varying -= outputs
        items, formulas, names, self.aliases = recomputed
        taken |= names
        return items, formulas, []

    def _backward_version(self, adjoints, taken, reuse):
        """``_backward_items`` on copies: (items, formulas, the names it took, the gradient aliases it found)."""
        names, self.aliases = set(taken), {}
        items, formulas = self._backward_items(adjoints, names, reuse)
        return items, formulas, names, self.aliases

    def _cost(self, items) -> tuple[int, int]:
        """Per-element tensors a backward loads, and the function calls it evaluates."""
        free = {s for _, _, expr in items for s in expr.free_symbols}
        tensors = {s for s in free if s in self.element}
        return len(tensors), sum(len(expr.atoms(sympy.Function)) for _, _, expr in items)

    def _output_reuse(self) -> tuple[set[sympy.Symbol], dict[sympy.Expr, sympy.Expr]]:
        """The per-element outputs that are one function call times a per-row factor (``y = exp(x - max) / sum``),
        as symbols, and each such call written in its output: ``{exp(x - max): y * sum}``; and the outputs that are
        a sum of per-element inputs (a fused add + norm's ``x + residual``), which stand for that sum: the backward
        then loads one saved tensor instead of each input."""
        outputs, reuse = set(), {}
        for name, expr in self.outputs.items():
            if name in self.row_outputs:
                continue
            if isinstance(expr, sympy.Add) and all(self._scaled_input(term) for term in expr.args):
                output = sympy.Symbol(name, real=True)
                outputs.add(output)
                reuse[expr] = output
                continue
            factors = sympy.Mul.make_args(expr)
            calls = [f for f in factors if isinstance(f, sympy.Function) and not self._row_constant(f)]
            rest = sympy.Mul(*(f for f in factors if f not in calls))
            if len(calls) == 1 and self._row_constant(rest) and rest != 0:
                output = sympy.Symbol(name, real=True)
                outputs.add(output)
                reuse[calls[0]] = output / rest
        return outputs, reuse

    def _scaled_input(self, term: sympy.Expr) -> bool:
        """``c * x`` for one per-element input ``x`` and a number ``c``."""
        coefficient, rest = term.as_coeff_Mul()
        return rest in self.element and coefficient.is_number

    def _backward_items(
        self, adjoints, taken, reuse: dict[sympy.Expr, sympy.Expr]
    ) -> tuple[list[tuple[str, str, sympy.Expr]], dict[str, str]]:
        """Backward statements in order (recomputed extrema, row sums, adjoints, gradients) and readable formulas
        of the adjoints and gradients; ``reuse`` rewrites function calls in the outputs that equal them."""
        items: list[tuple[str, str, sympy.Expr]] = []
        formulas: dict[str, str] = {}
        for statistic in self.statistics:
            if statistic.reduce in ("max", "min") and adjoints[statistic.name] != 0:
                items.append((recomputed_symbol(statistic.name).name, statistic.reduce, statistic.operand))
        sums: dict[sympy.Expr, sympy.Symbol] = {}

        def name_sums(expr: sympy.Expr) -> sympy.Expr:
            def replace(node):
                # Row-constant factors leave the sum: one multiply per row instead of one per element.
                constant, varying = sympy.S.One, sympy.S.One
                for factor in sympy.Mul.make_args(name_sums(node.args[0])):
                    if self._row_constant(factor):
                        constant *= factor
                    else:
                        varying *= factor
                if varying == 1:
                    return self.n * constant
                known = self._known_sum(varying)
                if known is not None:  # the row sum of a statistic's own operand: the statistic, not a reduction
                    return constant * known
                if varying not in sums:
                    sums[varying] = sympy.Symbol(_fresh("row_sum", taken), real=True)
                    items.append((sums[varying].name, "sum", varying))
                return constant * sums[varying]

            return expr.replace(lambda node: isinstance(node, RowSum), replace)

        # The adjoints (per-row values, later statistics first) are written into the gradients, which then take
        # their common factors out: rstd * (dy * w - mean(dy * w) - ...) subtracts like-sized terms before scaling
        # by rstd, where the distributed form would leave an fp32 rounding error of the scaled terms behind (a
        # one-column LayerNorm's gradient is exactly 0 this way).
        written: dict[sympy.Symbol, sympy.Expr] = {}
        for statistic in reversed(self.statistics):
            adjoint = adjoints[statistic.name].xreplace(reuse)
            if adjoint == 0:
                continue
            symbol = adjoint_symbol(statistic.name)
            formulas[symbol.name] = format_formula(adjoint)
            written[symbol] = name_sums(adjoint).xreplace(written)
        seen: dict[sympy.Expr, str] = {}
        for name in [*self.inputs, *self.parameters]:
            per_row = self.parameters.get(name) == "scalar"
            gradient = self._gradient(name, adjoints, per_row=per_row).xreplace(reuse)
            formulas[f"grad_{name}"] = format_formula(gradient)
            if name in self.inputs and gradient != 0 and gradient in seen:
                # x + residual: both inputs get the same gradient, computed and written once.
                self.aliases[f"grad_{name}"] = seen[gradient]
                continue
            if name in self.inputs:
                seen[gradient] = f"grad_{name}"
            kind = "row_value" if per_row else "value"
            # Again after factoring: sympy distributes a number over a sum (2 * (x + residual) -> 2*x + 2*residual),
            # which factor_terms gathers back into the sum an output stands for.
            expr = sympy.factor_terms(name_sums(gradient).xreplace(written)).xreplace(reuse)
            items.append((f"grad_{name}", kind, expr))
        return _read_by(items, {f"grad_{name}" for name in [*self.inputs, *self.parameters]}), formulas


def _read_by(items: list[tuple[str, str, sympy.Expr]], roots: set[str]) -> list[tuple[str, str, sympy.Expr]]:
    """``items`` without those that no root reads, directly or through others: an adjoint whose terms cancel only
    once written into the gradients (log(softmax(x) + eps): the max's adjoint) leaves its row sums unread."""
    needed, kept = set(roots), []
    for name, kind, expr in reversed(items):
        if name in needed:
            kept.append((name, kind, expr))
            needed |= {symbol.name for symbol in expr.free_symbols}
    return kept[::-1]


def _zero_default(expr: sympy.Expr) -> bool:
    """``where(condition, value, 0)``."""
    return (
        isinstance(expr, sympy.Piecewise)
        and len(expr.args) == 2
        and expr.args[1].cond == sympy.true
        and expr.args[1].expr == 0
    )


_SMOOTH = (sympy.Symbol, sympy.Number, sympy.NumberSymbol, sympy.Add, sympy.Mul, sympy.Pow, sympy.exp, sympy.log)


def chain_derivative(expr: sympy.Expr, symbol: sympy.Symbol) -> sympy.Expr:
    """d expr / d symbol by the chain rule through each largest smooth part of ``expr`` that holds ``symbol`` (built
    of sums, products, powers, exp and log): ``expr``'s derivative in that part, times the part's own derivative.
    sympy pushes the inner factor into every branch of a piecewise; here it stays outside, so derivatives in two
    symbols that enter only through one part share one piecewise factor and cancel as terms do."""
    parts: dict[sympy.Expr, sympy.Dummy] = {}

    def smooth(node) -> bool:
        return all(isinstance(sub, _SMOOTH) for sub in sympy.preorder_traversal(node))

    def collect(node):
        if symbol not in node.free_symbols:
            return
        if smooth(node):
            parts.setdefault(node, sympy.Dummy("part"))
            return
        for argument in node.args:
            collect(argument)

    collect(expr)
    if list(parts) == [expr] or not parts:
        return sympy.diff(expr, symbol)
    outer = expr.xreplace(parts)
    back = {dummy: part for part, dummy in parts.items()}
    try:
        return sympy.Add(
            *(sympy.diff(outer, dummy).xreplace(back) * sympy.diff(part, symbol) for part, dummy in parts.items())
        )
    except (TypeError, ValueError):  # a part under a node sympy differentiates only in its own argument (Abs)
        return sympy.diff(expr, symbol)


def recomputed_symbol(statistic: str) -> sympy.Symbol:
    """The backward's maximum or minimum, recomputed from the same operand (equal to the statistic)."""
    return sympy.Symbol(f"{statistic}_recomputed", real=True)


def adjoint_symbol(statistic: str) -> sympy.Symbol:
    """The backward's name for a statistic's adjoint (d loss / d statistic, one value per row)."""
    return sympy.Symbol(f"grad_{statistic}", real=True)


class _TooLarge(Exception):
    pass


def _fresh(prefix: str, taken: set[str]) -> str:
    index = 0
    name = prefix
    while name in taken:
        name = f"{prefix}{index}"
        index += 1
    taken.add(name)
    return name


def _identity_when_masked(operand: sympy.Expr, kind: str, masked: dict[sympy.Symbol, sympy.Expr]) -> bool:
    """Whether a reduction's operand equals its identity in every masked lane, the loaded values there being
    ``masked`` (substituted together, so that 0 / 0 stays NaN) and any per-row value what it is: then the load's
    fill already masks the reduction, which needs no ``tl.where`` (an exact answer or False, never a guess)."""
    try:
        value = operand.subs(masked, simultaneous=True)
        target = _IDENTITY_VALUES[kind]
        if value == target:
            return True
        return bool(target.is_finite and not value.has(sympy.nan, sympy.zoo) and sympy.simplify(value - target) == 0)
    except (TypeError, ValueError, RecursionError, AttributeError):
        return False


def _schedule(
    items,
    taken: set[str],
    constants: dict[str, str] | None = None,
    masked: dict[sympy.Symbol, sympy.Expr] | None = None,
    one_row: bool = False,
) -> list[str]:
    """Statements for ``items`` (name, kind, expr): named constants and common subexpressions of all of them hoisted
    into temporaries named by role (``naming.py``), each statement emitted right after the values it reads. The
    constants come first, or go into ``constants`` (name -> literal) for a kernel that defines them above its loops.
    ``masked``: what the kernel's loads read in masked lanes; a reduction whose operand is then its identity there
    (``_identity_when_masked``) reduces without a ``tl.where`` (without ``masked``, every reduction has one).
    ``one_row``: statements of a program that walks one row in 1-D chunks (a loss's), whose per-row values are scalars."""
    if not items:
        return []
    # Derived: a norm's or std's root (its gradient masked at 0) is the power it computes from here on, named and
    # printed as one (sqrt_var, not a temporary of an unknown function).
    items = [
        (name, kind, expr.replace(lambda node: isinstance(node, Root), lambda node: node.as_builtin()))
        for name, kind, expr in items
    ]
    # log1p, expm1 and erfc of the reference by the utils' functions, as in tier-1 kernels (a small result's digits).
    accurate = with_accurate_forms({index: expr for index, (_, _, expr) in enumerate(items)}, TritonPrinter)
    items = [(name, kind, accurate[index]) for index, (name, kind, _) in enumerate(items)]
    named, hoisted, reduced = hoist([expr for _, _, expr in items], set(taken) | {name for name, _, _ in items})
    if constants is not None:
        constants.update(named)
    hoisted, reduced = _by_named_roots(hoisted, reduced)
    definitions = {symbol: (symbol.name, "value", expr) for symbol, expr in hoisted}
    order = []
    for (name, kind, _), expr in zip(items, reduced):
        symbol = sympy.Symbol(name, real=True)
        definitions[symbol] = (name, kind, expr)
        order.append(symbol)

    lines: list[str] = []
    emitted: set[sympy.Symbol] = set()
    values = {symbol: expr for symbol, (_, kind, expr) in definitions.items() if kind not in REDUCE_KINDS}

    def unfolded(expr: sympy.Expr) -> sympy.Expr:
        """``expr`` with the temporaries and values it reads written out (reductions stay per-row symbols)."""
        for _ in range(16):
            replaced = expr.xreplace(values)
            if replaced == expr:
                break
            expr = replaced
        return expr

    def emit(symbol: sympy.Symbol) -> None:
        if symbol in emitted or symbol not in definitions:
            return
        emitted.add(symbol)
        name, kind, expr = definitions[symbol]
        for dependency in sorted(expr.free_symbols, key=lambda s: s.name):
            emit(dependency)
        filled = masked is not None and kind in REDUCE_KINDS and _identity_when_masked(unfolded(expr), kind, masked)
        lines.append(_statement(name, kind, expr, masked_by_fill=filled, one_row=one_row))

    for symbol in order:
        emit(symbol)
    return (constant_lines(named) if constants is None else []) + lines


_ASSIGNED = re.compile(r"^([A-Za-z_]\w*) = ")
_NAME = re.compile(r"[A-Za-z_]\w*")


def without_dead_temporaries(lines: list[str], kept: set[str]) -> list[str]:
    """``lines`` (``name = value`` statements and others) without the assignments that neither a later line reads nor
    ``kept`` names: a temporary that only statements taken out of ``lines`` read is a dead store (ruff's F841)."""
    live, result = set(kept), []
    for line in reversed(lines):
        assigned = _ASSIGNED.match(line)
        if assigned and assigned.group(1) not in live:
            continue
        result.append(line)
        live |= set(_NAME.findall(line))
    return result[::-1]


def _by_named_roots(hoisted: list[tuple], reduced: list[sympy.Expr]) -> tuple[list[tuple], list[sympy.Expr]]:
    """Other negative powers of a value whose rsqrt is a named temporary, as powers of that temporary: 1 / v as
    rsqrt(v) * rsqrt(v), v**-1.5 as its cube. A norm's 1 / (var + eps) beside its rsqrt is then two multiplies
    instead of a division, which sat between a row's sums and its gradients (LayerNorm's sweep backward at 16384 x
    14336 columns: benchmark/data/h100_2026-12-06_s28)."""
    roots = {value.base: symbol for symbol, value in hoisted if value.is_Pow and value.exp == -sympy.S.Half}
    if not roots:
        return hoisted, reduced

    def is_other_power(node) -> bool:
        if not node.is_Pow or node.base not in roots:
            return False
        exponent = node.exp
        return exponent.is_Rational and exponent.is_negative and exponent.q in (1, 2) and exponent != -sympy.S.Half

    def rewrite(expr: sympy.Expr) -> sympy.Expr:
        return expr.replace(is_other_power, lambda node: roots[node.base] ** int(-2 * node.exp))

    hoisted = [
        (symbol, value if value.is_Pow and value.exp == -sympy.S.Half else rewrite(value)) for symbol, value in hoisted
    ]
    return hoisted, [rewrite(expr) for expr in reduced]


def _statement(name: str, kind: str, expr: sympy.Expr, masked_by_fill: bool = False, one_row: bool = False) -> str:
    if kind in ("value", "row_value"):
        if expr != 0:
            return f"{name} = {print_triton(expr)}"
        if one_row:  # a chunk of one row: a 1-D tile, scalar row values
            return f"{name} = 0.0" if kind == "row_value" else f"{name} = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)"
        shape = "(BLOCK_ROWS, BLOCK_COLS)" if kind == "value" else "(BLOCK_ROWS, 1)"
        return f"{name} = tl.zeros({shape}, dtype=tl.float32)"
    operand = print_triton(expr) if masked_by_fill else f"tl.where(mask, {print_triton(expr)}, {_IDENTITY[kind]})"
    reduction = f"{_TL_REDUCE[kind]}({operand}{'' if one_row else ', axis=1, keep_dims=True'})"
    return f"{name} = {reduction} / {N_COLS}" if kind == "mean" else f"{name} = {reduction}"


def _collected_row_sums(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` (linear in its row sums) with each row sum's coefficients added up and cancelled: merging sums over a
    shared divisor leaves the same sum under several symbolic coefficients (``beta**2 * S - 2 * beta * S + ...``),
    which sympy does not combine, and whose total may be 0 (a sum the gradient then does not need)."""
    expanded = sympy.expand(expr)
    sums = sorted(expanded.atoms(RowSum), key=sympy.default_sort_key)
    coefficients = [expanded.coeff(row_sum) for row_sum in sums]
    if any(c.has(RowSum) for c in coefficients):
        return expr  # not linear in its row sums: left as it is
    rest = sympy.expand(expanded - sum(c * row_sum for c, row_sum in zip(coefficients, sums)))
    return rest + sum(sympy.cancel(c) * row_sum for c, row_sum in zip(coefficients, sums))


__all__ = [
    "REDUCE_KINDS",
    "RowMath",
    "RowPass",
    "RowProgramError",
    "RowSum",
    "synthesize_rows",
    "without_dead_temporaries",
]
