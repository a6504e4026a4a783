"""Lower a loss reference (tier 3) to a row program plus the reduction of its rows.

A loss takes ``[rows, classes]`` tensors (logits, log-probabilities, distributions), class indices, one per row, and
per-row numbers (``[rows]``: a per-token weight, an old policy's log-probability; ``trace.py`` finds them).
Every value the reference computes has a level: per element (varies along the row), per row (a statistic, a class
index, what is computed from them alone) or over rows (a sum or mean of per-row values: the loss). Per-element and
per-row values lower as in tier 2 (``program.py``), with ``col`` (the column index) for what class indices select:

- ``x.gather(-1, target[:, None])`` and ``F.one_hot(target, n)`` pick by ``col == target``; ``F.cross_entropy``,
  ``F.nll_loss`` and ``F.kl_div`` are written out (ignored rows, label smoothing, ``log_target``, every reduction);
- ``v.sum()``/``v.mean()`` over every dim reduce rows (a per-element ``v`` is first summed along its row);
  ``sum / x.shape[0]`` (batchmean), ``sum / x.numel()``, ``sum / mask.sum()`` (mean over the rows that count) make a
  mean with that per-row denominator (batchmean's is ``batch_share``, size(0) / rows of the inputs as passed);
  ``.clamp(min=...)`` of a denominator is its floor (``OverRows.floor``); a mean over no counted row is 0;
- means over different counts added (Hinton's distillation: cross entropy over the kept rows plus a batchmean KL):
  each becomes a sum whose rows are scaled by ``inv_<count>``, 1 / its count over the whole batch (``scales``, known
  once the class indices are), and the loss is their sum over rows;
- ``F.kl_div``, ``F.mse_loss``, ``F.l1_loss``, ``F.binary_cross_entropy(_with_logits)`` reduced by torch: their
  element-wise terms summed along each row, then over rows (a mean: over every element);
- an integer compared with class indices, or given as ``ignore_index``, is the int hyper-parameter with that
  default (the trace sees only its value);
- class weights (an input of one value per class, ``trace.py`` finds them): read along the row as a per-element
  value of every row, and at a class index (``weight=`` of ``F.cross_entropy``/``F.nll_loss``, ``w[target]``,
  ``w.gather(0, target)``, ``w.index_select(0, target)``, ``torch.take``, a one-hot row sum of them) as
  ``take(w, target)``, a per-row value; ``F.cross_entropy``'s weighted mean divides by ``sum(where(kept, w[t], 0))``
  and its label smoothing weighs each class's term by ``w[c]``, as torch does.

What cannot be written this way (a reduction over columns, a maximum over rows, a class weight with a gradient)
stops analysis with the op and its line.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from typing import Any

import sympy
import torch.fx as fx

from tools.kernelgen.analyze.classify import MOVES_DIMS
from tools.kernelgen.analyze.classify import class_loss_fed
from tools.kernelgen.analyze.classify import structural_reason
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import META
from tools.kernelgen.analyze.ops import REDUCTION
from tools.kernelgen.analyze.ops import STRUCTURAL
from tools.kernelgen.analyze.ops import OpCall
from tools.kernelgen.analyze.ops import pointwise_loss
from tools.kernelgen.analyze.ops import reduced_dims
from tools.kernelgen.analyze.program import ProgramBuilder
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.profile import BATCH_SHARE
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth.functions import Take
from tools.kernelgen.synth.functions import as_stored
from tools.kernelgen.synth.functions import indicator
from tools.kernelgen.synth.functions import select
from tools.kernelgen.synth.losses import COL
from tools.kernelgen.synth.rules import is_condition


@dataclass(frozen=True)
class OverRows:
    """The sum over rows of the per-row ``value``, divided by the sum over rows of ``divisor`` (None: a sum).
    ``floor``: that sum (of ``value`` for a sum, of ``divisor`` for a mean) taken at least this (``.clamp(min=...)``
    of a mean's denominator)."""

    value: sympy.Expr
    divisor: sympy.Expr | None = None
    floor: float | None = None


def _batch_share() -> sympy.Symbol:
    """Per row, the batch's count a mean "per batch" divides by: torch divides by input.size(0), the rows of
    [rows, classes] inputs and fewer than the rows of [batch, tokens, classes] ones (the wrapper sets it)."""
    return sympy.Symbol(BATCH_SHARE, real=True)


@dataclass(frozen=True)
class RowCount:
    """``x.shape[0]`` (``factor`` 1) or ``x.numel()`` (``factor`` n_cols): the rows, times a per-row count."""

    factor: sympy.Expr


@dataclass(frozen=True)
class TokensPerSequence:
    """``T`` of ``B, T, V = logits.shape``: the rows are B * T, so only its product with ``B`` (``RowCount`` of
    ``batch_share``) is a count the loss can divide by."""


@dataclass(frozen=True)
class CountScale:
    """``name`` in the per-row values: 1 / the sum over rows of ``divisor`` (at least ``floor``), one mean's share of
    each row where the loss adds means over different counts."""

    name: str
    divisor: sympy.Expr
    floor: float | None = None


@dataclass
class LoweredLoss:
    statistics: list[tuple[str, str, sympy.Expr]]
    outputs: dict[str, sympy.Expr]  # per-row values
    reduction: str  # mean, sum or none
    denominator: sympy.Expr
    int_hyperparameters: list[str]  # int hyper-parameters the math reads
    denominator_floor: float | None = None  # a mean's denominator summed over rows is taken at least this
    scales: list[CountScale] = dataclasses.field(default_factory=list)  # what the outputs' inv_<count> names are
    # Per output, in order: computed in fp32 after an upcast (``F.cross_entropy(logits.float(), ...)``), so the
    # reference returns it in fp32 whatever the inputs' dtype.
    upcast: list[bool] = dataclasses.field(default_factory=list)


class LossBuilder(ProgramBuilder):
    def __init__(self, traced: TracedReference):
        super().__init__(traced)
        self.index_symbols = {self.symbols[name] for name in traced.index_inputs}
        # Float inputs of one value per row (a per-token weight): constants of the row, as class indices are.
        self.row_value_symbols = {self.symbols[name] for name in traced.row_inputs}
        per_row = {*traced.index_inputs, *traced.row_inputs}
        self.element_symbols = {self.symbols[n] for n in traced.tensor_inputs if n not in per_row}
        self.element_symbols.add(self.col)
        self.class_symbols = {self.symbols[name] for name in traced.class_inputs}
        # Per-class values at a class index: a row symbol each while lowering, take(values, index) in the formulas.
        self.picks: dict[sympy.Symbol, Take] = {}
        # Specialised ints by value: the hyper-parameter an integer constant stands for.
        self.int_defaults: dict[int, str] = {}
        for hp in traced.hyperparameters:
            if hp.type == "int" and hp.name in traced.specialized and hp.default not in self.int_defaults:
                self.int_defaults[hp.default] = hp.name
        self.int_used: list[str] = []
        self.taken |= {COL, "loss"}  # a single output becomes "loss"
        # Means over different counts: each count's (divisor, floor) -> the symbol of 1 / it (CountScale).
        self.scales: dict[tuple[sympy.Expr, float | None], sympy.Symbol] = {}

    def _first_extremum(self, base: str, kind: str, x: sympy.Expr, call: OpCall) -> sympy.Symbol:
        # A sum at the first column holding the extremum would read as a pick at a class index (x[target]), which
        # a loss gathers before its row is walked: that column is known only after it.
        raise self._error(
            f"`{call.label}` in a loss: its gradient goes to the first column holding the {kind}imum, which a loss "
            f"kernel does not derive; amax/amin split it evenly between ties (write x.amax(-1), or .detach() a max "
            f"subtracted as a shift)",
            call.node,
        )

    def _plain_error(self, message: str) -> AnalyzeError:
        return AnalyzeError(message, origin=self.traced.loaded.origin)

    # Levels ------------------------------------------------------------------------------------------------
    def per_element(self, value: Any) -> bool:
        return isinstance(value, sympy.Basic) and bool(value.free_symbols & self.element_symbols)

    def _row_constants(self) -> set[sympy.Symbol]:
        ints = {self._int_symbol(n) for n in self.int_used}
        return super()._row_constants() | self.index_symbols | self.row_value_symbols | ints | set(self.picks)

    def _class_valued(self, value: Any) -> bool:
        """A value of one number per class (a class weight or one computed from them), nothing of the row."""
        if not isinstance(value, sympy.Basic):
            return False
        free = value.free_symbols
        return bool(free & self.class_symbols) and not free & (self.element_symbols - self.class_symbols)

    def _take(self, values: Any, index: Any, node: fx.Node) -> sympy.Expr:
        """``values[index]`` of per-class ``values`` at one class index per row: each class input read there."""
        call = self.traced.calls[node]
        if not self._class_valued(values):
            raise self._error(f"`{call.label}` picks by class index from a value that is no per-class input", node)
        if not isinstance(index, sympy.Basic) or self.per_element(index) or index.free_symbols & set(self.picks):
            raise self._error(f"`{call.label}` needs one class index per row", node)
        replaced = {}
        for symbol in sorted(values.free_symbols & self.class_symbols, key=lambda s: s.name):
            take = Take(symbol, index)
            existing = next((pick for pick, known in self.picks.items() if known == take), None)
            if existing is None:
                base = f"{symbol.name}_{index.name if isinstance(index, sympy.Symbol) else 'picked'}"
                name, count = base, 0
                while name in self.taken:
                    count += 1
                    name = f"{base}_{count}"
                self.taken.add(name)
                existing = sympy.Symbol(name, real=True)
                self.picks[existing] = take
            replaced[symbol] = existing
        return values.xreplace(replaced)

    def statistic(self, base: str, reduce: str, operand: sympy.Expr, node: fx.Node) -> sympy.Symbol:
        """A row sum of per-class values at the column of a class index (``(one_hot(t) * w).sum(-1)``) is the value
        at that index, read once per row; every other statistic as tier 2 makes it."""
        picked = _one_column_value(operand, self.col) if reduce == "sum" else None
        if picked is not None and self._class_valued(picked[0]) and not self.per_element(picked[1]):
            return self._take(picked[0], picked[1], node)
        return super().statistic(base, reduce, operand, node)

    def _int_symbol(self, name: str) -> sympy.Symbol:
        return sympy.Symbol(name, real=True)

    def _as_hyper(self, value: Any) -> Any:
        """An integer constant that is an int hyper-parameter's default stands for that hyper-parameter."""
        if isinstance(value, int) and not isinstance(value, bool) and value in self.int_defaults:
            name = self.int_defaults[value]
            if name not in self.int_used:
                self.int_used.append(name)
            return self._int_symbol(name)
        return value

    # Nodes -------------------------------------------------------------------------------------------------
    def _node(self, node: fx.Node) -> Any:
        if node.op in ("placeholder", "get_attr"):
            return super()._node(node)
        call = self.traced.calls[node]
        if call.family == META:
            return self._meta(call)
        if call.family == STRUCTURAL:
            return self._structural(call)
        operands = [self.value(operand) for operand in call.operands]
        if any(isinstance(v, (OverRows, RowCount, TokensPerSequence)) for v in operands):
            return self._over_rows_arithmetic(call, operands)
        if call.family == REDUCTION and operands and self._class_valued(operands[0]):
            return self._over_classes(call, operands[0])
        if call.family == REDUCTION and self._reduces_over_rows(call):
            return self._reduce_rows(call)
        if call.family == REDUCTION and operands and not self.per_element(operands[0]):
            shape = self.traced.shape(call.operands[0])
            dims = reduced_dims(call, len(shape)) if shape is not None else None
            if call.name in ("sum", "mean", "amax", "amin") and dims and all(shape[d] == 1 for d in dims):
                return operands[0]  # along the size-1 dim a per-row value kept ([rows, 1])
            raise self._error(f"`{call.label}` reduces some of the rows; a loss reduces all of its rows or none", node)
        if call.name in ("eq", "ne") and any(isinstance(v, sympy.Basic) and v in self.index_symbols for v in operands):
            return apply_op(call.name, *(self._as_hyper(v) for v in operands))
        return super()._node(node)

    def _meta(self, call: OpCall) -> Any:
        node = call.node
        if call.name == "numel":
            return RowCount(self.n if self.per_element(self.value(node.args[0])) else sympy.S.One)
        return super()._meta(call)

    def _dim_size(self, tensor: fx.Node, dim: int, call: OpCall) -> Any:
        shape = self.traced.shape(tensor)
        if shape is None:
            raise self._error(f"`{call.label}`: the size of a tensor whose shape is unknown", call.node)
        dim %= len(shape)
        if dim == 0 and len(shape) in (2, 3) and self.per_element(self.value(tensor)):
            # x.shape[0] of [rows, classes] or [B, T, classes]: size(0) of the inputs as passed
            return RowCount(_batch_share())
        if dim == 1 and len(shape) == 3 and self.per_element(self.value(tensor)):
            return TokensPerSequence()
        if dim == 0 and len(shape) in (1, 2):
            return RowCount(sympy.S.One)
        if dim == len(shape) - 1 and self.per_element(self.value(tensor)):
            return self.n
        raise self._error(
            f"`{call.label}`: dim {dim} of a {len(shape)}-d tensor; a loss takes [rows, classes]", call.node
        )

    # Library losses and selection by class index -----------------------------------------------------------
    def _structural(self, call: OpCall) -> Any:
        node = call.node
        if call.name == "gather":
            return self._gather(call)
        if call.name in ("index", "take", "index_select"):
            return self._class_pick(call)
        if call.name == "one_hot":
            return indicator(_without_piecewise(self.col, self.value(call.index_operands[0])))
        if call.name == "scatter":
            return self._scatter(call)
        if call.name in ("cross_entropy", "nll_loss"):
            return self._class_loss(call)
        if call.name in ("getitem", "slice") and call.operands:
            value = self.value(call.operands[0])
            if isinstance(value, sympy.Basic) and not self.per_element(value):
                return value  # [:, 0] of a per-row value kept as [rows, 1]
        if pointwise_loss(call) is not None:
            return self._whole_tensor_loss(call)
        # Classes moved to dim 1 for F.cross_entropy (lucidrains' logits.transpose(1, 2)) come first: the ops after
        # the loss (a chosen/rejected .chunk()) are only there because the loss is per token.
        moved = next((c for c in self.traced.calls.values() if c.name in MOVES_DIMS and class_loss_fed(c)), None)
        if moved is not None and moved is not call:
            raise self._error(structural_reason(dataclasses.replace(moved, line=None)), moved.node)
        # Not a loss's pick by class index: say what the op does (a matrix product, a sort), as classification did.
        why = structural_reason(dataclasses.replace(call, line=None))
        raise self._error(f"{why}; a loss kernel picks classes by index only (gather, one_hot, take)", node)

    def _gather(self, call: OpCall) -> sympy.Expr:
        node = call.node
        dim = call.options.get("dim")
        source = self.value(call.operands[0])
        shape = self.traced.shape(call.operands[0])
        if dim is not None and shape is not None and dim % len(shape) != len(shape) - 1:
            raise self._error(f"`{call.label}` gathers along dim {dim}; a loss picks along its classes (dim -1)", node)
        rows = call.options.get("rows")  # x[torch.arange(n), t]: n must be the rows of x
        if rows is not None and (shape is None or len(shape) != 2 or self.traced.shape(rows) != shape[:1]):
            raise self._error(f"`{call.label}` must pick one class per row of a [rows, classes] value", node)
        index = self.value(call.index_operands[0])
        if dim is not None and dim % len(shape or (1,)) == 0 and self._class_valued(source):
            return self._take(source, index, node)  # w.gather(0, target): a class weight per row
        if self.per_element(index) or not self.per_element(source):
            raise self._error(f"`{call.label}` must pick one class per row of a [rows, classes] value", node)
        return self._picked(source, index, node)

    def _scatter(self, call: OpCall) -> sympy.Expr:
        """``x.scatter(-1, target[:, None], v)``: ``v`` at each row's class index, ``x`` elsewhere (a one-hot row
        by ``zeros_like(x).scatter_(1, t[:, None], 1)``, a smoothed one by ``full_like``); ``v`` one value per row."""
        node = call.node
        source = self.value(call.operands[0])
        shape = self.traced.shape(call.operands[0])
        dim = call.options.get("dim")
        src = call.options.get("src", call.options.get("value"))
        src = self.value(src) if isinstance(src, fx.Node) else src
        along_classes = isinstance(dim, int) and shape is not None and len(shape) == 2 and dim % 2 == 1
        index = self.value(call.index_operands[0]) if call.index_operands else None
        plain = call.options.get("reduce") is None and isinstance(src, (int, float, sympy.Basic))
        if not (along_classes and plain and index is not None and not self.per_element(index)):
            raise self._error(
                f"`{call.label}` must write one value per row at one class index per row of a [rows, classes] value "
                f"(x.scatter(-1, target[:, None], value))",
                node,
            )
        if isinstance(src, sympy.Basic) and self.per_element(src):
            raise self._error(f"`{call.label}` scatters a [rows, classes] value; scatter one value per row", node)
        return select(_without_piecewise(self.col, index), src, source)

    def _class_pick(self, call: OpCall) -> sympy.Expr:
        """``w[target]``, ``torch.take(w, target)``, ``w.index_select(0, target)``: per-class values picked by class
        index, one per row."""
        node = call.node
        source = self.value(call.operands[0]) if call.operands else None
        single = call.name != "index" or isinstance(node.args[1], fx.Node)
        along_classes = call.name != "index_select" or call.options.get("dim") == 0
        if not (single and along_classes and self._class_valued(source)):
            raise self._error(
                f"`{call.label}` ({call.name}) is not part of a loss kernelgen can write per row (it picks per-class "
                f"values, w[target], by one class index per row)",
                node,
            )
        return self._take(source, self.value(call.index_operands[0]), node)

    def _picked(self, source: sympy.Expr, index: sympy.Expr, node: fx.Node, base: str | None = None) -> sympy.Expr:
        """The element of each row at class ``index``: a row sum of the one element where ``col == index``."""
        base = base or self._assigned_name(node) or "picked"
        hit = _without_piecewise(self.col, index)
        return self.statistic(base, "sum", select(hit, source, sympy.S.Zero), node)

    def _option(self, call: OpCall, name: str) -> Any:
        value = call.options.get(name)
        return self.value(value) if isinstance(value, fx.Node) else value

    def _class_loss(self, call: OpCall) -> Any:
        """torch's definitions: with class weights ``w`` a row's loss is ``w[t] * nll`` (label smoothing: ``(1 - s) *
        w[t] * (lse - x[t]) + s / n * sum_c w[c] * (lse - x[c])``) and the mean divides by the kept rows' ``w[t]``."""
        node = call.node
        x = self.value(call.operands[0])
        target = self.value(call.operands[1])
        weight = self._option(call, "weight")
        if weight is not None and not self._class_valued(weight):
            raise self._error(f"`{call.label}`: its weight must be one value per class (an input of [classes])", node)
        if call.name == "cross_entropy" and self.per_element(x) and self.per_element(target):
            return self._probability_loss(call, x, target, weight)
        if not self.per_element(x) or self.per_element(target):
            raise self._error(f"`{call.label}` needs [rows, classes] scores and one class index per row", node)
        picked_weight = self._take(weight, target, node) if weight is not None else sympy.S.One
        kept = sympy.Ne(target, self._as_hyper(self._option(call, "ignore_index")))
        picked = self._picked(x, target, node, "picked")
        if call.name == "nll_loss":
            row = -picked * picked_weight
        else:
            base = "lse"
            peak = self.statistic(f"{base}_max", "max", x, node)
            total = self.statistic(f"{base}_sum", "sum", sympy.exp(x - peak), node)
            lse = peak + sympy.log(total)
            row = (lse - picked) * picked_weight
            smoothing = self._option(call, "label_smoothing") or 0
            if not (isinstance(smoothing, (int, float)) and smoothing == 0):
                if weight is None:
                    mean = self.statistic(f"{base}_row_sum", "sum", x, node) / self.n
                    row = (1 - smoothing) * row + smoothing * (lse - mean)
                else:
                    classes = self.statistic(f"{base}_weight_sum", "sum", weight, node)
                    weighted = self.statistic(f"{base}_weighted_sum", "sum", weight * x, node)
                    row = (1 - smoothing) * row + smoothing * (lse * classes - weighted) / self.n
        return self._reduced(select(kept, row, sympy.S.Zero), select(kept, picked_weight, sympy.S.Zero), call)

    def _probability_loss(self, call: OpCall, x: Any, target: Any, weight: Any) -> Any:
        """torch's cross entropy with a probability target ``p`` (a distribution over each row): ``sum_c w[c] * p[c]
        * (lse - x[c])``, label smoothing mixing ``p`` with the uniform ``1 / n``; the mean divides by the rows."""
        node = call.node
        smoothing = self._option(call, "label_smoothing") or 0
        if not (isinstance(smoothing, (int, float)) and smoothing == 0):
            target = (1 - smoothing) * target + smoothing / self.n
        weighted = target * (weight if weight is not None else sympy.S.One)
        peak = self.statistic("lse_max", "max", x, node)
        total = self.statistic("lse_sum", "sum", sympy.exp(x - peak), node)
        mass = self.statistic("target_mass", "sum", weighted, node)
        dot = self.statistic("target_dot", "sum", weighted * x, node)
        return self._reduced((peak + sympy.log(total)) * mass - dot, sympy.S.One, call)

    def _whole_tensor_loss(self, call: OpCall) -> Any:
        """``F.kl_div``, ``F.mse_loss``, ``F.l1_loss``, ``F.binary_cross_entropy(_with_logits)``: the element-wise
        terms summed along each row, then summed or averaged over every element (kl_div's batchmean: over rows).
        reduction="none" never gets here: ops.normalize makes it the element-wise op."""
        name, options = pointwise_loss(call)
        terms = apply_op(name, *(self.value(operand) for operand in call.operands[:2]), **options)
        reduction = call.options.get("reduction", "mean")
        short = "kl" if call.name == "kl_div" else call.name.removesuffix("_loss")
        row = self.statistic(self._assigned_name(call.node) or short, "sum", terms, call.node)
        divisor = {"sum": None, "mean": self.n, "batchmean": _batch_share() if call.name == "kl_div" else "?"}.get(
            reduction, "?"
        )
        if divisor == "?":
            raise self._error(f"`{call.label}` with reduction={reduction!r}", call.node)
        return OverRows(row, divisor)

    def _reduced(self, row: sympy.Expr, counted: sympy.Expr, call: OpCall) -> Any:
        reduction = call.options.get("reduction", "mean")
        if reduction == "none":
            return row
        if reduction == "sum":
            return OverRows(row)
        if reduction == "mean":
            return OverRows(row, counted)
        raise self._error(f"`{call.label}` with reduction={reduction!r}", call.node)

    def _over_classes(self, call: OpCall, value: sympy.Expr) -> sympy.Symbol:
        """``w.sum()`` of per-class values: a statistic over the classes, the same in every row (``w / w.sum()``
        normalises class weights; a loss divided by it stays a sum over rows)."""
        kinds = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min"}
        if call.name not in kinds:
            raise self._error(
                f"`{call.label}` of per-class values: kernelgen reduces them by sum, mean, max or min", call.node
            )
        return self.statistic(self._assigned_name(call.node) or call.node.name, kinds[call.name], value, call.node)

    def _class_statistics(self) -> set[sympy.Symbol]:
        """Statistics of per-class values alone: the same number in every row."""
        return {
            sympy.Symbol(name, real=True)
            for name, _, operand in self.program.statistics
            if self._class_valued(operand) or not (operand.free_symbols - self.class_symbols - self._hyper_symbols())
        }

    # Reductions over rows ----------------------------------------------------------------------------------
    def _reduces_over_rows(self, call: OpCall) -> bool:
        shape = self.traced.shape(call.operands[0])
        if shape is None:
            # Shapes unknown (the reference did not run on the examples): ``v.sum()``/``v.mean()`` of every dim
            # still reduces the rows, whatever the rank; read as a reduction along the row it would be no loss.
            return _every_dim(call)
        dims = reduced_dims(call, len(shape))
        if dims is None:
            return False
        return 0 in dims

    def _reduce_rows(self, call: OpCall) -> OverRows:
        node = call.node
        if call.name not in ("sum", "mean"):
            raise self._error(f"`{call.label}` over rows: a loss sums or averages its rows", node)
        value = self.value(call.operands[0])
        if is_condition(value):
            value = indicator(value)  # mask.sum(): a count
        shape = self.traced.shape(call.operands[0])
        if shape is not None and len(reduced_dims(call, len(shape))) != len(shape):
            raise self._error(
                f"`{call.label}` reduces rows but not every dim; reduce all of them (or only dim -1)", node
            )
        if self.per_element(value):
            value = self.statistic(self._assigned_name(node) or node.name, "sum", value, node)
            count = self.n
        else:
            count = sympy.S.One
        return OverRows(value, count if call.name == "mean" else None)

    def _over_rows_arithmetic(self, call: OpCall, operands: list[Any]) -> Any:
        """Sums over rows scaled, added or divided: what keeps the loss a (weighted) sum or mean of rows."""
        node = call.node
        name = call.name
        first, second = (operands + [None])[:2]
        scaled = [v for v in (first, second) if isinstance(v, OverRows) and self._scaled(v)]
        if scaled and (name == "clamp" or (name == "div" and scaled[-1] is second)):
            raise self._error(
                f"`{call.label}` clamps or divides by a loss that adds means over different counts; only a count (a "
                f"mask's sum, x.shape[0]) is clamped or divided by",
                node,
            )
        if name in ("clamp",) and isinstance(first, OverRows) and first.divisor is None:
            # A denominator kept at least ``min`` (a mask's count at 1): a sum of fractional weights may be below it.
            low, high = call.options.get("min"), call.options.get("max")
            if high is not None or not isinstance(low, (int, float)) or first.floor is not None:
                raise self._error(f"`{call.label}` of a sum over rows: only a number as its min is read", node)
            return OverRows(first.value, None, float(low))
        if name in ("float", "double", "to", "type_as", "contiguous", "view", "reshape", "squeeze", "unsqueeze"):
            return first
        # A clamped sum is a count: a denominator (the second operand of a division), never a term of the loss.
        counts = [first] if name == "div" else [first, second]
        if any(isinstance(v, OverRows) and v.floor is not None and v.divisor is None for v in counts):
            raise self._error(
                f"`{call.label}` of a clamped sum over rows: a clamp is read on a mean's denominator", node
            )
        if name == "neg" and isinstance(first, OverRows):
            return OverRows(-first.value, first.divisor, first.floor)
        if name == "mul" and {type(first), type(second)} == {RowCount, TokensPerSequence}:
            count = first if isinstance(first, RowCount) else second
            if count.factor == _batch_share():
                return RowCount(sympy.S.One)  # B * T: every row
        if isinstance(first, TokensPerSequence) or isinstance(second, TokensPerSequence):
            raise self._error(
                f"`{call.label}` reads T of [B, T, classes] logits apart from B: a loss divides by B * T (every "
                "row), B (input.size(0)) or a count of rows",
                node,
            )
        if name == "mul" and isinstance(first, RowCount) and isinstance(second, RowCount):
            raise self._error(f"`{call.label}` multiplies two row counts", node)
        if name == "mul" and isinstance(second, RowCount) and isinstance(first, sympy.Basic):
            return RowCount(second.factor * first)
        if name == "mul" and isinstance(first, RowCount) and isinstance(second, sympy.Basic):
            return RowCount(first.factor * second)
        if name in ("mul", "div") and isinstance(first, OverRows) and self._scalar(second):
            factor = second if name == "mul" else 1 / second
            return OverRows(first.value * factor, first.divisor, first.floor)
        if name == "mul" and isinstance(second, OverRows) and self._scalar(first):
            return OverRows(second.value * first, second.divisor, second.floor)
        if name == "div" and isinstance(first, OverRows) and first.divisor is None:
            mean = None
            if isinstance(second, RowCount):
                mean = OverRows(first.value, second.factor)
            elif isinstance(second, OverRows) and second.divisor is None and not self.per_element(second.value):
                mean = OverRows(first.value, second.value, second.floor)
            if mean is not None:
                # Means already scaled by their counts, averaged again: a sum scaled by this count too.
                return self._as_scaled_sum(mean) if scaled else mean
        if name in ("add", "sub") and isinstance(first, OverRows) and isinstance(second, OverRows):
            sign = 1 if name == "add" else -1
            if first.divisor == second.divisor and first.floor == second.floor:
                return OverRows(first.value + sign * second.value, first.divisor, first.floor)
            # Means over different counts (a cross entropy over the kept rows plus a batchmean KL): each row's share
            # of each, summed over rows.
            return OverRows(self._as_scaled_sum(first).value + sign * self._as_scaled_sum(second).value)
        raise self._error(
            f"`{call.label}` on a value summed over rows: a loss is a sum or a mean of per-row values (divide a sum "
            f"by x.shape[0], x.numel() or the sum of a per-row mask)",
            node,
        )

    def _as_scaled_sum(self, over: OverRows) -> OverRows:
        """A mean as the sum over rows of each row's value times 1 / the mean's count; a sum as it is."""
        if over.divisor is None:
            return over
        return OverRows(over.value * self._count_scale(over.divisor, over.floor))

    def _scaled(self, over: OverRows) -> bool:
        """Whether ``over`` adds means over different counts (its rows read a count's scale)."""
        return bool(sympy.sympify(over.value).free_symbols & set(self.scales.values()))

    def _count_scale(self, divisor: sympy.Expr, floor: float | None) -> sympy.Symbol:
        """The symbol of 1 / the sum over rows of ``divisor`` (at least ``floor``), one per count."""
        key = (sympy.sympify(divisor), floor)
        if key not in self.scales:
            base = _count_name(key[0], self.n)
            name, count = base, 0
            while name in self.taken:
                count += 1
                name = f"{base}_{count}"
            self.taken.add(name)
            self.scales[key] = sympy.Symbol(name, real=True)
        return self.scales[key]

    def _scalar(self, value: Any) -> bool:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        fixed = self._hyper_symbols() | self._class_statistics()  # the same for every row
        return isinstance(value, sympy.Basic) and not (value.free_symbols - fixed)

    def _hyper_symbols(self) -> set[sympy.Symbol]:
        return {self.symbols[name] for name in self.traced.runtime_hyperparameters} | {self.n}


def _count_name(divisor: sympy.Expr, n_cols: sympy.Symbol) -> str:
    """The name of 1 / a count over rows, after what it counts: the rows, the batch (batchmean), every element, the
    rows a condition keeps (``target != ignore_index``), a per-row value's sum (kept or not: a token weight, a class
    weight at the target), or a denominator of another kind."""
    kept = divisor
    if isinstance(divisor, sympy.Piecewise) and len(divisor.args) == 2 and divisor.args[1].expr == 0:
        kept = divisor.args[0].expr
    if divisor == 1:
        return "inv_n_rows"
    if divisor == _batch_share():
        return "inv_batch_size"
    if divisor == n_cols:
        return "inv_n_elements"
    if kept is not divisor and kept == 1:
        return "inv_n_kept"
    if isinstance(kept, sympy.Symbol):
        return f"inv_{kept.name}_sum"
    return "inv_denominator"


def _every_dim(call: OpCall) -> bool:
    """A reduction without ``dim``: of every dim."""
    return call.family == REDUCTION and call.options.get("dim") in (None, (), [])


def _one_column_value(operand: sympy.Expr, col: sympy.Symbol) -> tuple[sympy.Expr, sympy.Expr] | None:
    """``(value, index)`` when ``operand`` is ``where(col == index, value, 0)`` or ``value * where(col == index, 1,
    0)`` (a one-hot row times per-class values): its row sum is the value at ``index``."""
    factors = sympy.Mul.make_args(operand)
    for factor in factors:
        if not (isinstance(factor, sympy.Piecewise) and len(factor.args) == 2):
            continue
        (value, condition), (otherwise, always) = factor.args
        if always != sympy.true or otherwise != 0 or not isinstance(condition, sympy.Eq) or col not in condition.args:
            continue
        index = condition.args[1] if condition.args[0] == col else condition.args[0]
        if col in index.free_symbols:
            continue
        rest = sympy.Mul(*(other for other in factors if other is not factor))
        return value * rest, index
    return None


def _without_piecewise(col: sympy.Symbol, index: sympy.Expr) -> sympy.Basic:
    """``col == index`` for an index computed piecewise (``target.clamp(min=0)``) as an or of ands: sympy would
    rewrite the equality into an if-then-else that neither prints nor reads back."""
    if not isinstance(index, sympy.Piecewise):
        return sympy.Eq(col, index)
    cases, earlier = [], []
    for value, condition in index.args:
        here = sympy.And(*(sympy.Not(c) for c in earlier), condition)
        cases.append(sympy.And(here, _without_piecewise(col, value)))
        earlier.append(condition)
    return sympy.Or(*cases)


class PerElementOutputError(AnalyzeError):
    """A tier-3 reference with an output of a value per element: no loss (``refusals.py`` names what made it tier 3)."""


def lower_loss(traced: TracedReference) -> LoweredLoss:
    """The loss program of ``traced``: statistics, per-row outputs and how the rows reduce."""
    builder = LossBuilder(traced)
    outputs: dict[str, sympy.Expr] = {}
    kinds = set()
    values = [builder.value(node) for node in traced.outputs]
    reduced = [value for value in values if isinstance(value, OverRows)]
    if len(reduced) == len(values) and len({(v.divisor, v.floor) for v in reduced}) > 1:
        # Outputs averaged over different counts (a loss and an extra of its own count): sums of scaled rows alike.
        values = [builder._as_scaled_sum(value) for value in values]
    for name, node, value in zip(traced.output_names, traced.outputs, values):
        if isinstance(value, OverRows):
            if value.divisor is None and value.floor is not None:
                raise builder._error(
                    f"output '{name}' is a clamped sum over rows; a clamp is read on a mean's denominator", node
                )
            kinds.add(("sum", None, None) if value.divisor is None else ("mean", value.divisor, value.floor))
            value = value.value
            counted = sympy.sympify(value).free_symbols
            labels_alone = builder.index_symbols | {builder._int_symbol(n) for n in builder.int_used}
            if name != traced.output_names[0] and counted and counted <= labels_alone:
                # valid.sum() returned beside the loss: a count of rows that reads no scores, no output of a loss kernel.
                raise builder._error(
                    f"output '{name}' counts rows from the labels alone (it reads no scores): a loss kernel returns "
                    f"values of its scores; return the loss alone and count the rows where it is called",
                    node,
                )
        elif isinstance(value, sympy.Basic) and not builder.per_element(value):
            kinds.add(("none", None, None))
        else:
            error = builder._error(
                f"output '{name}' has a value per element; a loss returns one value per row or reduces its rows", node
            )
            raise PerElementOutputError(str(error)) from None
        outputs[name] = sympy.sympify(value)
    if len(kinds) != 1:
        raise builder._error(
            "the outputs are reduced over rows in different ways; reduce them alike", traced.outputs[0]
        )
    ((reduction, divisor, floor),) = kinds
    takes = dict(builder.picks)  # each picked class value as the formulas spell it
    return LoweredLoss(
        statistics=[(name, reduce, operand.xreplace(takes)) for name, reduce, operand in builder.program.statistics],
        # An output cast back to the inputs' dtype as a whole (``F.cross_entropy(logits.float(), ...,
        # reduction="none").to(logits.dtype)``) is the store's own rounding, in the output's dtype.
        outputs={name: as_stored(expr).xreplace(takes) for name, expr in outputs.items()},
        reduction=reduction,
        denominator=sympy.sympify(divisor if divisor is not None else 1).xreplace(takes),
        int_hyperparameters=list(builder.int_used),
        denominator_floor=floor,
        scales=[
            CountScale(symbol.name, divisor.xreplace(takes), floor)
            for (divisor, floor), symbol in builder.scales.items()
            if any(symbol in expr.free_symbols for expr in outputs.values())
        ],
        upcast=[builder.dtype_of(node) == "fp32" for node in traced.outputs],
    )


__all__ = ["CountScale", "LoweredLoss", "PerElementOutputError", "lower_loss"]
