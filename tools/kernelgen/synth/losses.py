"""Derive a loss over a long row (tier 3): the row program of ``rows.py`` scheduled over chunks of the row.

A vocabulary row (32K to 256K classes) does not fit a program's registers, so every statistic is computed in passes
over column chunks with running values: sums add, maxima and minima combine, and a sum whose operand carries a
maximum's shift as a factor ``exp(-k * m)`` (the sum of a softmax's exponentials) is kept *online*: when a chunk
raises the running maximum, the running sum is rescaled by ``exp(-k * (m_new - m_old))``. A statistic that needs
another one otherwise (a variance around a mean) waits for a later pass. A shift of -inf (a chunk or a prefix with
every value -inf) is replaced by 0 in the exponent, so an all -inf prefix adds nothing instead of NaN.

The per-row outputs (the row's loss and any per-row extra) are then formulas of the statistics, and the gradient of
the first output with respect to every per-element input follows from the adjoints of the statistics alone:
whatever row sums the chain rule asks for must be statistics already (the shift of a softmax cancels exactly, and
``sum(exp(x - m) * x)`` is the statistic that defined it), so one more pass writes the gradient, chunk by chunk.
When the gradient reads no statistic of the last pass (a KL divergence's reads none at all), it is written in that
pass instead: the inputs are read once. ``grad_{loss}`` is the weight of the row in the loss (set by the template
from the reduction); the other outputs are values the loss reports, and the Function refuses a gradient reaching
them.

A per-class input (class weights, ``[n_cols]``) is a per-element constant of every row, loaded at ``col``; read at a
class index (``take(w, target)``) it is a row value of its own, loaded once per row before the passes.

A row *gate* is a condition on class indices and hyper-parameters alone under which every output is 0 (``target !=
ignore_index``): the template skips such rows after writing a zero gradient, and the math is derived for the rows
that count.

Printed statements work on ``[1, BLOCK]`` chunks (one row per program) with ``mask`` marking the real columns and
``col`` their indices; statistics are ``[1, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from itertools import combinations

import sympy

from sympy.logic.boolalg import to_nnf
from sympy.logic.inference import satisfiable

from tools.kernelgen.synth.derive import _precision_sensitive_ops
from tools.kernelgen.synth.derive import tidy_derivative
from tools.kernelgen.synth.functions import Detached
from tools.kernelgen.synth.functions import Take
from tools.kernelgen.synth.naming import constant_lines
from tools.kernelgen.synth.printer import format_formula
from tools.kernelgen.synth.printer import integer_symbols
from tools.kernelgen.synth.printer import print_triton
from tools.kernelgen.synth.printer import print_triton_index
from tools.kernelgen.synth.renaming import RenamingMemo
from tools.kernelgen.synth.rows import COL  # the column index of each element of a chunk
from tools.kernelgen.synth.rows import RowProgramError
from tools.kernelgen.synth.rows import RowSum
from tools.kernelgen.synth.rows import _fresh
from tools.kernelgen.synth.rows import _Program
from tools.kernelgen.synth.rows import _schedule
from tools.kernelgen.synth.rows import _TooLarge
from tools.kernelgen.synth.rows import adjoint_symbol

_IDENTITY = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}
_COMBINE = {"max": "tl.maximum", "min": "tl.minimum"}


@dataclass
class LossMath:
    """Statements of the chunked schedule (see the module docstring)."""

    init: list[str]  # running statistics before the first pass
    passes: list[list[str]]  # per pass: statements run on each chunk
    pass_reads: list[list[str]]  # per pass: the per-element inputs and row values each chunk reads
    outputs_block: list[str]  # after the passes: the per-row outputs
    adjoints: list[str]  # grad_{statistic} from grad_{loss} and the statistics, before the gradient is written
    gradient: list[str]  # grad_{input} of one chunk
    gradient_reads: list[str]  # what the gradient statements read besides the adjoints' results
    gradient_pass: int | None  # the pass the gradient is written in, or None: a pass of its own after the row
    gate: str | None  # printed condition under which the row counts (None: every row does)
    gate_reads: list[str]
    outputs: list[str]
    gradients: list[str]  # grad_{input} names the gradient statements assign
    gradient_formulas: dict[str, str] = field(default_factory=dict)
    precision_sensitive_ops: list[str] = field(default_factory=list)
    zero_adjoints: list[str] = field(default_factory=list)
    # Per-class values at a class index, loaded once per row: (row value, per-class input, printed integer index).
    picks: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: str | None = None  # the gate's negation, printed: the row does not count (``target == ignore_index``)


def synthesize_loss(
    statistics: list[tuple[str, str, sympy.Expr]],
    outputs: dict[str, sympy.Expr],
    inputs: list[str],
    hyperparameters: list[str] | None = None,
    constants: list[str] | None = None,
    row_inputs: list[str] | None = None,
    integer_hyperparameters: list[str] | None = None,
    class_inputs: list[str] | None = None,
    row_values: list[str] | None = None,
    staged: bool = False,
) -> LossMath:
    """The chunked forward (with the gradient of the first output) of a loss over long rows.

    ``inputs``: per-element tensors that get a gradient; ``constants``: per-element tensors that do not;
    ``row_inputs``: one value per row (class targets); ``col`` (the column index) and ``n_cols`` may appear in any
    formula. Every output must be one value per row. ``integer_hyperparameters``: those holding integers
    (``ignore_index``), compared with class indices as integers. ``class_inputs``: the constants of one value per
    class, which ``take(name, index)`` reads at a class index. ``row_values``: numbers of one value per row (a
    per-token weight), row constants like ``row_inputs`` but compared as numbers; they take no gradient.
    ``staged``: every output is a per-token statistic of a sequence stage, differentiated through its adjoint
    ``grad_{output}`` (one value per row, known only after the forward), so the gradient is a sweep of its own.
    """
    integer_hyperparameters = list(integer_hyperparameters or [])
    hyperparameters = list(hyperparameters or [])
    row_inputs = list(row_inputs or [])
    row_values = list(row_values or [])
    constants = [*(constants or []), COL]
    taken = {*inputs, *constants, *row_inputs, *row_values, *hyperparameters}
    taken |= {*(name for name, _, _ in statistics), *outputs}
    picks, statistics, outputs = split_picks(
        statistics, outputs, list(class_inputs or []), {*inputs, *constants}, taken
    )
    row_inputs += [name for name, _, _ in picks]
    # A sequence stage reads every token's statistics (an ignored token's too): no row is skipped.
    gate, outputs = (None, outputs) if staged else split_gate(outputs, {*row_inputs, *row_values, *hyperparameters})
    statistics, outputs = split_statistics(statistics, outputs, {*inputs, *constants})
    for _ in range(_MAX_BACKWARD_SUMS + 1):
        program = _Program(statistics, outputs, inputs, {}, hyperparameters, constants, [*row_inputs, *row_values])
        not_per_row = [name for name in program.outputs if name not in program.row_outputs]
        if not_per_row:
            raise RowProgramError(f"outputs {not_per_row} vary along the row; a loss gives one value per row")
        with integer_symbols({COL, *row_inputs, *integer_hyperparameters}):
            try:
                math = _LossSchedule(program, gate, staged).derive()
            except _MissingRowSum as missing:
                new = list(dict.fromkeys(missing.operands))
                if any(operand == known for operand in new for _, _, known in statistics):
                    raise
                if any(symbol.name not in program.symbols for operand in new for symbol in operand.free_symbols):
                    raise  # a sum over values the schedule makes of its own (a recomputed maximum's)
                # Row sums only the gradient reads (TVD over softmaxes: sum(p * sign(p - q))): more statistics,
                # each summed in the pass after those its operand reads.
                for operand in new:
                    taken = {*taken, *(name for name, _, _ in statistics)}
                    statistics = [*statistics, (_fresh("gradient_sum", taken), "sum", operand)]
                refused = missing
                continue
            math.picks = [(name, values, print_triton_index(index)) for name, values, index in picks]
        return math
    raise refused


def split_picks(statistics, outputs, class_inputs: list[str], element_names: set[str], taken: set[str]):
    """Every ``take(values, index)`` as a row value of its own (``weight_target``), which the kernel loads once per
    row: ``[(name, values, index)]`` and the statistics and outputs reading those names."""
    found: dict[Take, sympy.Symbol] = {}
    taken = set(taken)

    def named(expr):
        for take in sorted(sympy.sympify(expr).atoms(Take), key=str):
            if take in found:
                continue
            values, index = take.args
            if not isinstance(values, sympy.Symbol) or values.name not in class_inputs:
                raise RowProgramError(f"{format_formula(take)} reads {values}, which is no per-class input")
            if any(symbol.name in element_names for symbol in index.free_symbols):
                raise RowProgramError(f"{format_formula(take)}: the index must be one class index per row")
            base = f"{values.name}_{index.name if isinstance(index, sympy.Symbol) else 'picked'}"
            found[take] = sympy.Symbol(_fresh(base, taken), real=True)
            taken.add(found[take].name)
        return sympy.sympify(expr).xreplace(found)

    statistics = [(name, reduce, named(operand)) for name, reduce, operand in statistics]
    outputs = {name: named(expr) for name, expr in outputs.items()}
    picks = [(symbol.name, take.args[0].name, take.args[1]) for take, symbol in found.items()]
    return picks, statistics, outputs


def split_statistics(statistics, outputs, element_names: set[str]):
    """Sums whose operand reads earlier statistics, rewritten as row-constant combinations of sums that read them
    at most through a softmax's shift: ``sum(where(col == t, x - m - log(s), 0))`` is
    ``picked - (m + log(s)) * hit`` with ``picked = sum(where(col == t, x, 0))`` and ``hit = sum(where(col == t, 1,
    0))``. Those run in the first pass (online), not in a pass after ``s``: one sweep over the row less. A ``hit``
    whose condition holds at exactly one column of the row (a picked class) is 1, not a statistic (a row sum of
    constants costs a reduction per chunk, and LLVM takes minutes to compile it)."""
    names = {name for name, _, _ in statistics}
    split: list[tuple[str, str, sympy.Expr]] = []
    replaced: dict[sympy.Symbol, sympy.Expr] = {}
    taken = set(names) | set(outputs) | element_names

    def varies(factor) -> bool:
        return any(symbol.name in element_names for symbol in factor.free_symbols)

    for name, reduce, operand in statistics:
        operand = sympy.sympify(operand).xreplace(replaced)
        reads_statistics = any(symbol.name in names for symbol in operand.free_symbols)
        groups = (
            _linear_terms(_detach_distributed(operand), varies)
            if reduce in ("sum", "mean") and reads_statistics
            else None
        )
        if groups is None or list(groups.items()) == [(operand, sympy.S.One)]:
            split.append((name, reduce, operand))
            continue
        # A part that still reads a statistic other than a softmax's shift (a max) runs in a pass after it anyway:
        # the split saves no pass, and sums that cancel (a KL's cross entropy less the entropy, each ~log(V) for a
        # difference near 0) lose what fp32 keeps of the difference taken element by element.
        shifts = {other for other, kind, _ in split if kind == "max"}
        if any(
            symbol.name in names and symbol.name not in shifts
            for varying in groups
            for symbol in sympy.sympify(varying).free_symbols
        ):
            split.append((name, reduce, operand))
            continue
        total = sympy.S.Zero
        for index, (varying, coefficient) in enumerate(groups.items()):
            if varying == 1:
                total += coefficient * (sympy.Symbol("n_cols", real=True) if reduce == "sum" else 1)
                continue
            if _one_column_indicator(varying, element_names):
                total += coefficient * (1 if reduce == "sum" else 1 / sympy.Symbol("n_cols", real=True))
                continue
            existing = [other for other, kind, of in split if kind == reduce and of == varying]
            if existing:  # the exponentials' sum of a softmax, already a statistic
                part = existing[0]
            else:
                part = _fresh(f"{name}_{index}", taken)
                split.append((part, reduce, varying))
            total += coefficient * sympy.Symbol(part, real=True)
        replaced[sympy.Symbol(name, real=True)] = total
    outputs = {name: sympy.sympify(expr).xreplace(replaced) for name, expr in outputs.items()}
    return split, outputs


def _one_column_indicator(expr: sympy.Expr, element_names: set[str]) -> bool:
    """Whether ``expr`` is ``where(c, 1, 0)`` with ``c`` true at exactly one column of every row: ``col == i`` for a
    row value ``i`` (a class index, which a gather requires to be one of the row's columns), or an or of cases ``r_k
    & (col == i_k)`` whose row conditions ``r_k`` are exclusive and exhaustive (``target.clamp(min=0)``)."""
    if not (isinstance(expr, sympy.Piecewise) and len(expr.args) == 2 and expr.args[0].expr == 1):
        return False
    if expr.args[1].cond != sympy.true or expr.args[1].expr != 0:
        return False
    element_names = set(element_names) - {COL}
    row_conditions = []
    for case in sympy.Or.make_args(expr.args[0].cond):
        parts = sympy.And.make_args(case)
        if any(symbol.name in element_names for part in parts for symbol in part.free_symbols):
            return False
        picks = [part for part in parts if any(symbol.name == COL for symbol in part.free_symbols)]
        if len(picks) != 1 or not isinstance(picks[0], sympy.Eq):
            return False
        sides = [side for side in picks[0].args if not (isinstance(side, sympy.Symbol) and side.name == COL)]
        if len(sides) != 1 or any(symbol.name == COL for symbol in sides[0].free_symbols):
            return False
        row_conditions.append(sympy.And(*(part for part in parts if part is not picks[0])))
    exhaustive = satisfiable(sympy.Not(sympy.Or(*row_conditions))) is False
    return exhaustive and all(satisfiable(sympy.And(a, b)) is False for a, b in combinations(row_conditions, 2))


def _detach_distributed(expr: sympy.Expr) -> sympy.Expr:
    """``detach(a + b)`` as ``detach(a) + detach(b)``: a detached log-softmax (a reverse KL's teacher, ``t - m -
    log(s)``) splits as the undetached one does, its shift and log-sum a row-constant coefficient of no gradient."""

    def distributed(node: Detached) -> sympy.Expr:
        inner = sympy.expand(node.args[0], power_exp=False, power_base=False, log=False)
        return sympy.Add(*(Detached(term) for term in sympy.Add.make_args(inner)))

    return expr.replace(lambda node: isinstance(node, Detached), distributed)


def _linear_terms(expr: sympy.Expr, varies) -> dict[sympy.Expr, sympy.Expr] | None:
    """``expr`` as ``{varying part: row-constant coefficient}`` (a product's factors that vary along the row form
    its varying part; a ``where(c, a, 0)`` factor distributes over the terms of ``a``)."""
    groups: dict[sympy.Expr, sympy.Expr] = {}
    expanded = sympy.expand(expr, power_exp=False, power_base=False, log=False, deep=False)
    for term in sympy.Add.make_args(expanded):
        coefficient, varying = sympy.S.One, []
        for factor in sympy.Mul.make_args(term):
            if varies(factor):
                varying.append(factor)
            else:
                coefficient *= factor
        gated = [
            f
            for f in varying
            if isinstance(f, sympy.Piecewise)
            and len(f.args) == 2
            and f.args[1].cond == sympy.true
            and f.args[1].expr == 0
        ]
        if len(gated) == 1:
            (value, condition), _ = gated[0].args
            rest = sympy.Mul(*(f for f in varying if f is not gated[0]))
            inner = _linear_terms(value * rest, varies)
            if inner is None:
                return None
            for part, weight in inner.items():
                key = sympy.Piecewise((part, condition), (0, True))
                groups[key] = groups.get(key, 0) + coefficient * weight
            continue
        key = sympy.Mul(*varying)
        groups[key] = groups.get(key, 0) + coefficient
    return {key: value for key, value in groups.items() if value != 0}


def split_gate(outputs: dict[str, sympy.Expr], row_names: set[str]) -> tuple[sympy.Basic | None, dict]:
    """The condition under which a row counts, when every output is ``where(condition, value, 0)`` (or the value
    times that indicator) with the same condition on row values alone; the outputs without it."""
    gates, bodies = set(), {}
    for name, expr in outputs.items():
        expr = sympy.sympify(expr)
        # where(kept, a, 0) + where(kept, b, 0) is where(kept, a + b, 0).
        found = _gated(expr, row_names) or _gated(sympy.piecewise_fold(expr), row_names)
        if found is None:
            return None, dict(outputs)
        gates.add(found[0])
        bodies[name] = found[1]
    if len(gates) != 1:
        return None, dict(outputs)
    return gates.pop(), bodies


def _gated(expr: sympy.Expr, row_names: set[str]) -> tuple[sympy.Basic, sympy.Expr] | None:
    def row_only(condition) -> bool:
        return bool(condition.free_symbols) and all(s.name in row_names for s in condition.free_symbols)

    if isinstance(expr, sympy.Piecewise) and len(expr.args) == 2:
        (value, condition), (otherwise, always) = expr.args
        if always == sympy.true and otherwise == 0 and row_only(condition):
            return condition, value
    if isinstance(expr, sympy.Mul):
        for factor in expr.args:
            found = _gated(factor, row_names)
            if found is not None and found[1] == 1:
                return found[0], sympy.Mul(*(other for other in expr.args if other is not factor))
    return None


class _MissingRowSum(RowProgramError):
    """Row sums the gradient reads that no statistic defines; ``operands``: what they sum (statistics by name)."""

    def __init__(self, message: str, operands: list[sympy.Expr]):
        super().__init__(message)
        self.operands = operands


_MAX_BACKWARD_SUMS = 3  # rounds of statistics added for the gradient alone, before the loss is refused
# Online shifts by (sum's operand, maximum), kept for the losses a process derives again over other names.
_SHIFTS = RenamingMemo(kept=1024)


class _LossSchedule:
    def __init__(self, program: _Program, gate, staged: bool = False):
        self.program = program
        self.unshifted: dict[sympy.Symbol, sympy.Symbol] = {}
        self.gate = gate
        self.staged = staged
        self.symbols = program.symbols
        self.stats = {s.name: s for s in program.statistics}

    # Passes ------------------------------------------------------------------------------------------------
    def _online_shift(self, statistic, peak) -> sympy.Expr | None:
        """k when ``statistic`` (a sum) depends on the maximum ``peak`` only through a factor ``exp(-k * peak)``."""
        if statistic.reduce != "sum" or peak.reduce != "max":
            return None
        symbol = self.symbols[peak.name]
        return _SHIFTS((statistic.operand, symbol), lambda: _shift_exponent(statistic.operand, symbol))

    def _assign_passes(self) -> tuple[dict[str, int], dict[str, tuple[str, sympy.Expr]]]:
        """Each statistic's pass over the row: the pass after every statistic it reads, except that a sum reading a
        maximum only through ``exp(-k * peak)`` can follow it online in the maximum's own pass, rescaled as the
        maximum grows. Online only where that makes it earlier: in a later pass the maximum is final, and a
        rescaling there would apply the last chunk's growth of it again (a distillation KL read two maxima and two
        sums, followed the teacher's maximum into the pass after the sums and went wrong past one chunk)."""
        passes: dict[str, int] = {}
        online: dict[str, tuple[str, sympy.Expr]] = {}  # statistic -> (the maximum it follows, k)
        for statistic in self.program.statistics:
            reads = sorted(statistic.operand.free_symbols & self.program.stat_symbols, key=lambda s: s.name)
            after = {symbol.name: passes[symbol.name] + 1 for symbol in reads}
            level = max(after.values(), default=0)
            for symbol in reads:
                earlier = self.stats[symbol.name]
                others = [pass_ for name, pass_ in after.items() if name != earlier.name]
                followed = max([passes[earlier.name], *others])
                if followed >= level:
                    continue  # no earlier pass online (and no costly look for its shift)
                k = self._online_shift(statistic, earlier)
                if k is not None:
                    online[statistic.name] = (earlier.name, k)
                    level = followed
            passes[statistic.name] = level
        return passes, online

    # Printing ----------------------------------------------------------------------------------------------
    def derive(self) -> LossMath:
        program = self.program
        passes, online = self._assign_passes()
        taken = {str(s) for s in program.symbols} | set(program.outputs) | {COL, "mask", "start", "row"}
        taken |= {f"grad_{name}" for name in program.outputs} | {f"grad_{name}" for name in program.inputs}
        safe = {}  # a maximum as the exponents read it: -inf replaced by 0
        for peak, _ in online.values():
            if peak not in safe:  # one shift per maximum, however many sums follow it
                safe[peak] = sympy.Symbol(_fresh(f"{peak}_shift", taken), real=True)
        self.unshifted = {shift: self.symbols[peak] for peak, shift in safe.items()}
        shifts = {self.symbols[peak]: shift for peak, shift in safe.items()}
        shift_pass = {shift.name: passes[peak] for peak, shift in safe.items()}
        n_passes = max(passes.values(), default=-1) + 1

        adjoint_items, gradient_items, formulas = self._gradient_items(safe)
        adjoint_names = {name for name, _, _ in adjoint_items}
        gradient_reads = sorted({s.name for _, _, expr in gradient_items for s in expr.free_symbols} - adjoint_names)
        # Statistics the gradient needs (directly, or through the adjoints): the pass after theirs can write it.
        needed = set(gradient_reads) | {s.name for _, _, expr in adjoint_items for s in expr.free_symbols}
        latest = max(
            [passes[name] for name in needed if name in passes]
            + [shift_pass[name] for name in needed if name in shift_pass],
            default=-1,
        )
        gradient_pass = n_passes - 1 if latest < n_passes - 1 and not self.staged else None

        # One row a program: its running statistics are scalars.
        init = [f"{statistic.name} = {_IDENTITY[statistic.reduce]}" for statistic in program.statistics]
        init += [f"{shift} = 0.0" for shift in safe.values()]
        pass_lines, pass_reads = [], []
        constants: dict[str, str] = {}  # named constants of every statement, defined once above the passes
        for level in range(n_passes):
            members = [s for s in program.statistics if passes[s.name] == level]
            # Maxima first (and the shifts they move), then the statistics that read them.
            peaks = [s for s in members if s.name in safe]
            rest = [s for s in members if s.name not in safe]
            lines: list[str] = []
            reads: set[str] = set()
            for group in (peaks, rest):
                items = [(f"{s.name}_chunk", s.reduce, s.operand.xreplace(shifts)) for s in group]
                if group is rest and level == gradient_pass:
                    items += gradient_items  # one schedule: the exponentials both need are computed once
                lines += _schedule(items, set(taken), constants, one_row=True)
                reads |= {symbol.name for _, _, expr in items for symbol in expr.free_symbols}
                lines += self._combine(group, online, safe)
            pass_lines.append(lines)
            pass_reads.append(sorted(reads - adjoint_names))

        outputs = [(name, "value", expr) for name, expr in program.outputs.items()]
        outputs_block = _schedule(outputs, set(taken), constants, one_row=True)
        every = [s.operand for s in program.statistics] + [e for _, _, e in adjoint_items + gradient_items]
        every += list(program.outputs.values())
        gate_reads = sorted(s.name for s in self.gate.free_symbols) if self.gate is not None else []
        adjoints = _schedule(adjoint_items, set(taken), constants, one_row=True)
        gradient = _schedule(gradient_items, set(taken), constants, one_row=True) if gradient_pass is None else []
        return LossMath(
            init=constant_lines(constants) + init,
            passes=pass_lines,
            pass_reads=pass_reads,
            outputs_block=outputs_block,
            adjoints=adjoints,
            gradient=gradient,
            gradient_reads=gradient_reads,
            gradient_pass=gradient_pass,
            gate=print_triton(self.gate) if self.gate is not None else None,
            skipped=print_triton(to_nnf(sympy.Not(self.gate), simplify=False)) if self.gate is not None else None,
            gate_reads=gate_reads,
            outputs=list(program.outputs),
            gradients=[f"grad_{name}" for name in program.inputs],
            gradient_formulas=formulas,
            precision_sensitive_ops=_precision_sensitive_ops(every),
            zero_adjoints=self.zero_adjoints,
        )

    def _gradient_items(self, safe: dict) -> tuple[list, list, dict[str, str]]:
        """The adjoints the gradients read (per row) and the gradient of the loss for each input (per element)."""
        program = self.program
        adjoints, self.zero_adjoints = program._adjoints()
        loss = next(iter(program.outputs))
        silent = {program.grad_symbols[name]: 0 for name in program.outputs if name != loss and not self.staged}
        adjoint_items = []
        for statistic in reversed(program.statistics):
            if adjoints[statistic.name] != 0:
                adjoint_items.append(
                    (adjoint_symbol(statistic.name).name, "value", adjoints[statistic.name].xreplace(silent))
                )
        gradient_items, formulas, raw, missing = [], {}, [], []
        for name in program.inputs:
            gradient = tidy_derivative(program._gradient(name, adjoints, per_row=False).xreplace(silent))
            formulas[f"grad_{name}"] = format_formula(gradient)
            gradient = gradient.xreplace({self.symbols[p]: s for p, s in safe.items()})
            raw.append(gradient)
            try:
                gradient_items.append((f"grad_{name}", "value", sympy.factor_terms(self._rows_only(gradient))))
            except _MissingRowSum as error:  # every missing sum at once: one more derivation only
                missing.append(error)
        # Only the adjoints a gradient reads (directly or through a later statistic's adjoint) are computed.
        needed = {s.name for expr in raw if missing for s in expr.free_symbols}
        needed |= {s.name for _, _, expr in gradient_items if not missing for s in expr.free_symbols}
        for name, _, expr in reversed(adjoint_items):
            if name in needed:
                needed |= {s.name for s in expr.free_symbols}
        if missing:
            for _, _, expr in (item for item in adjoint_items if item[0] in needed):
                try:
                    self._rows_only(expr)
                except _MissingRowSum as error:
                    missing.append(error)
            raise _MissingRowSum(str(missing[0]), [operand for error in missing for operand in error.operands])
        adjoint_items = [(n, k, _factored(self._rows_only(e))) for n, k, e in adjoint_items if n in needed]
        return adjoint_items, gradient_items, formulas

    def _rows_only(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr`` with every row sum written as statistics; one that is not a statistic would need a pass of its
        own, which this schedule does not make. Row sums known only together (over a shared per-element divisor,
        JSD's mixture) are merged where one alone is not, with the later statistics' adjoints written out (equal
        adjoints of two KL terms are then one coefficient)."""
        try:
            return self._each_row_sum_known(expr)
        except RowProgramError:
            merged = self._merged_row_sums(expr)
            if merged is None:
                raise
            return self._each_row_sum_known(merged)

    def _merged_row_sums(self, expr: sympy.Expr) -> sympy.Expr | None:
        program = self.program
        written = getattr(program, "written_adjoints", {})
        expr = expr.xreplace({adjoint_symbol(name): value for name, value in written.items()})
        try:
            linear = program._linear(expr)
        except _TooLarge:
            return None
        merged = None
        for _ in range(4):
            step = program.merge_over_shared_divisors(linear if merged is None else merged)
            if step is None:
                break
            merged = step
        return None if merged is None else sympy.factor_terms(merged)

    def _each_row_sum_known(self, expr: sympy.Expr) -> sympy.Expr:

        def replace(node):
            operand = node.args[0]
            constant, varying = sympy.S.One, sympy.S.One
            for factor in sympy.Mul.make_args(operand):
                if self.program._row_constant(factor):
                    constant *= factor
                else:
                    varying *= factor
            if varying == 1:
                return self.program.n * constant
            known = self.program._known_sum(varying)
            if known is None:
                raise _MissingRowSum(
                    f"the gradient needs the row sum of {format_formula(varying)}, which is no statistic of the loss; "
                    f"add it as a statistic",
                    [self._shifted_by_peaks(varying.xreplace(self.unshifted))],
                )
            return constant * known

        return expr.replace(lambda node: isinstance(node, RowSum), replace)

    def _shifted_by_peaks(self, operand: sympy.Expr) -> sympy.Expr:
        """A row sum the gradient needs, as the statistic to add: each ``exp(k * x)`` factor of ``operand`` whose ``x``
        a maximum statistic ``M`` is taken over times ``exp(-k * M)`` (``sum(a * exp(a))`` as ``sum(a * exp(a -
        a_max))``, the row-constant ``exp(k * M)`` left to the coefficient, where it cancels): the linear split of row
        sums takes the shifts out of the exponentials, and the sum summed as it is would overflow for logits above
        about 88 in fp32. The maximum's online shift then rescales it as it does the softmax's sum."""
        peaks = [(self.program.symbols[s.name], s.operand) for s in self.program.statistics if s.reduce == "max"]
        factors = []
        # exp(a) * exp(-a_max) inside it (a mixture's log) as exp(a - a_max) first: that product overflows too.
        for factor in sympy.Mul.make_args(sympy.powsimp(operand, deep=True, combine="exp")):
            for peak, over in peaks if isinstance(factor, sympy.exp) else []:
                k = sympy.cancel(factor.args[0] / over) if over != 0 else None
                if k is not None and k.is_number and k.is_positive:
                    # One exponential, not exp(x) * exp(-k * M): that product overflows as the unshifted sum does.
                    factor = sympy.exp(factor.args[0] - k * peak)
                    break
            factors.append(factor)
        return sympy.Mul(*factors)

    def _combine(self, members, online, safe) -> list[str]:
        """Running values updated with one chunk's reductions; a maximum also moves its shift."""
        lines = []
        for statistic in members:
            name, chunk = statistic.name, f"{statistic.name}_chunk"
            if statistic.reduce in _COMBINE:
                lines.append(f"{name} = {_COMBINE[statistic.reduce]}({name}, {chunk})")
                if name in safe:
                    shift = safe[name]
                    lines.append(f"{shift}_previous = {shift}")
                    lines.append(f'{shift} = tl.where({name} == float("-inf"), 0.0, {name})')
            elif name in online:
                peak, k = online[name]
                shift = safe[peak]
                moved = sympy.Symbol(shift.name, real=True) - sympy.Symbol(f"{shift.name}_previous", real=True)
                lines.append(f"{name} = {name} * {print_triton(sympy.exp(-k * moved))} + {chunk}")
            else:
                lines.append(f"{name} = {name} + {chunk}")
        return lines


def _shift_exponent(operand: sympy.Expr, peak: sympy.Symbol) -> sympy.Expr | None:
    """k when ``operand`` depends on ``peak`` only through a factor ``exp(-k * peak)``, else None. A ``where`` whose
    conditions do not read ``peak`` has that factor when every branch but the zeros has it with the same k (the
    probability at a picked class, ``where(col == t, exp(x - m), 0)``)."""
    if isinstance(operand, sympy.Piecewise):
        if any(branch.cond.has(peak) for branch in operand.args):
            return None
        shifts = {_shift_exponent(branch.expr, peak) for branch in operand.args if branch.expr != 0}
        return shifts.pop() if len(shifts) == 1 else None
    step = sympy.Symbol("_step", real=True)
    ratio = sympy.simplify(operand.subs(peak, peak + step) / operand)
    exponent = sympy.simplify(sympy.log(ratio) / step) if ratio.has(sympy.exp) else None
    if exponent is None or exponent.free_symbols or not exponent.is_number or exponent == 0:
        return None
    return -exponent


_FACTOR_OPS_LIMIT = 400  # larger adjoints are left expanded: factoring them costs seconds of sympy


def _factored(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` factored where that is no longer: a statistic's adjoint is a polynomial in the hyper-parameters, and a
    factor such as ``(1 - beta)`` kept whole makes it exactly 0 where that factor is (expanded, ``beta * x - x``
    leaves fp32 rounding at ``beta = 1``)."""
    if sympy.count_ops(expr) > _FACTOR_OPS_LIMIT:
        return expr
    try:
        factored = sympy.factor(expr)
    except sympy.PolynomialError:
        return expr
    return factored if sympy.count_ops(factored) <= sympy.count_ops(expr) else expr


__all__ = ["COL", "LossMath", "split_gate", "split_picks", "synthesize_loss"]
