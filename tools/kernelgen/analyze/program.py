"""Lower a traced reference to a row program: sympy expressions over the inputs, parameters, hyper-parameters and
per-row statistics, each statistic one reduction (sum, mean, max, min) along the last dimension.

Element-wise ops go through ``apply_op``. Library reductions are written out in those four, so a library call and
the same math spelled by hand lower to the same program: ``mean`` and ``sum`` are one statistic each, ``var`` and
``std`` a mean and a centred sum of squares (torch's correction kept), ``norm`` a sum of powers, ``logsumexp``,
``softmax``, ``softmin`` (of the negated row) and ``log_softmax`` a max and a sum of exponentials shifted by it, ``layer_norm`` and ``rms_norm``
their means. Casts follow the reference: upcasts are free (the kernel computes in fp32), and a cast from an fp32
value back to an input's dtype (Llama's ``.to(input_dtype)`` before the weight) rounds there
(``cast_to_input``); a cast of a whole output is the store's own rounding.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass
from dataclasses import field
from typing import Any

import sympy
import torch
import torch.fx as fx

from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import ELEMENTWISE
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import META
from tools.kernelgen.analyze.ops import REDUCTION
from tools.kernelgen.analyze.ops import OpCall
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.analyze.trace import element_target
from tools.kernelgen.synth import SUPPORTED_OPS
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth import make_symbols
from tools.kernelgen.synth import to_sympy_number
from tools.kernelgen.synth.functions import CastToInput
from tools.kernelgen.synth.functions import as_stored
from tools.kernelgen.synth.functions import select
from tools.kernelgen.synth.rows import COL
from tools.kernelgen.synth.rows import N_COLS
from tools.kernelgen.synth.rules import is_condition

_UPCASTS = (torch.float32, torch.float64)
_INPUT, _FP32 = "input", "fp32"


def fixed_cast_dtype(call: OpCall) -> torch.dtype | None:
    """The dtype a cast names itself (``.half()``, ``.to(torch.int64)``), else None (``.to(x.dtype)``, a device)."""
    methods = {"half": torch.float16, "bfloat16": torch.bfloat16, "float": torch.float32, "double": torch.float64}
    methods.update({"long": torch.int64, "int": torch.int32})
    if call.name in methods:
        return methods[call.name]
    node = call.node
    arguments = list(node.args[1:]) + [node.kwargs[key] for key in ("dtype",) if key in node.kwargs]
    return next((argument for argument in arguments if isinstance(argument, torch.dtype)), None)


@dataclass(frozen=True)
class ShapeOf:
    """``x.shape`` or ``x.size()``: read only by indexing it with a dim."""

    tensor: fx.Node


@dataclass
class LoweredProgram:
    statistics: list[tuple[str, str, sympy.Expr]] = field(default_factory=list)
    outputs: dict[str, sympy.Expr] = field(default_factory=dict)
    keepdim: dict[str, bool] = field(default_factory=dict)  # per-row outputs: kept the reduced dimension


def variance_correction(call: OpCall) -> int:
    """The correction of a ``var`` / ``std`` call (torch's default 1, Bessel's; 0 for ``unbiased=False``)."""
    options = call.options
    if "correction" in options and options["correction"] is not None:
        return int(options["correction"])
    unbiased = options.get("unbiased", True)
    return 1 if unbiased in (True, None) else 0


class ProgramBuilder:
    def __init__(self, traced: TracedReference):
        self.traced = traced
        self.names = traced.tensor_inputs + [p.name for p in traced.parameters] + traced.runtime_hyperparameters
        self.symbols = make_symbols([*self.names, N_COLS])
        self.n = self.symbols[N_COLS]
        self.col = make_symbols([COL])[COL]  # an element's column: what x.max(dim).values picks
        self.cache: dict[fx.Node, Any] = {}
        self.dtypes: dict[fx.Node, str] = {}
        self.program = LoweredProgram()
        self.taken = set(self.names) | set(traced.output_names) | {N_COLS, COL}
        self.assignments = _single_name_assignments(traced.loaded.source)

    # Values ------------------------------------------------------------------------------------------------
    def value(self, value: Any) -> Any:
        if isinstance(value, fx.Node):
            if value not in self.cache:
                self.cache[value] = self._node(value)
            return self.cache[value]
        if isinstance(value, (tuple, list)):
            return type(value)(self.value(item) for item in value)
        return value

    def _parameter(self, target: str, node: fx.Node) -> sympy.Expr:
        name = self.traced.parameter_names.get(target)
        if name is None or name not in self.symbols:
            if target in dict(self.traced.graph_module.named_buffers()):
                raise self._error(
                    f"`self.{target}` is a buffer, not a learnable parameter: kernels read per-channel values from "
                    "parameters only (a one-value buffer is taken as a hyper-parameter); hold it as an nn.Parameter",
                    node,
                )
            raise self._error(f"`self.{target}` is not a per-channel or scalar parameter", node)
        return self.symbols[name]

    def _node(self, node: fx.Node) -> Any:
        if node.op == "placeholder":
            name = self.traced.placeholder_names[node]
            # A boolean input the reference selects by is the condition of its non-zero values.
            return sympy.Ne(self.symbols[name], 0) if name in self.traced.conditions else self.symbols[name]
        if node.op == "get_attr":
            return self._parameter(node.target, node)
        call = self.traced.calls[node]
        if call.family == META:
            return self._meta(call)
        if call.family == CAST:
            return self._cast(call)
        if call.family == LAYOUT and call.name == "parameter_element":
            target, index = call.operands[0].target, call.options["index"]
            held = dict(self.traced.graph_module.named_parameters()).get(target)
            if held is not None and held.dim() == 1:
                index %= held.shape[0]  # weight[-1] is the element weight[2] names
            return self._parameter(element_target(target, index), node)
        if call.family == LAYOUT:
            source = self.value(call.operands[0])
            # var_mean()[i]: one of the tuple's statistics; every other layout op passes its operand's value on.
            return source[call.options["index"]] if call.name == "statistic" else source
        if call.family == REDUCTION:
            return self._reduction(call)
        if call.family != ELEMENTWISE or call.name not in SUPPORTED_OPS:
            raise self._error(f"`{call.label}` ({call.name}) is not element-wise-synthesizable", node)
        operands = [self.value(operand) for operand in call.operands]
        options = {key: self.value(option) for key, option in call.options.items()}
        try:
            return apply_op(call.name, *operands, **options)
        except (ValueError, TypeError) as error:
            raise self._error(f"`{call.label}`: {error}", node) from None

    def _error(self, message: str, node: fx.Node) -> AnalyzeError:
        return AnalyzeError(
            f"{message}; rewrite it with supported ops {HAND_WRITTEN_PROFILE_HINT}",
            origin=self.traced.loaded.origin,
            line=node_line(node),
        )

    # Sizes -------------------------------------------------------------------------------------------------
    def _meta(self, call: OpCall) -> Any:
        """``x.shape[-1]``, ``x.size(-1)``: the row length ``n_cols``; ``x.dtype`` and the like are read by casts."""
        node = call.node
        if call.name == "shape":
            return ShapeOf(node.args[0])
        if call.name == "size":
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            return ShapeOf(node.args[0]) if dim is None else self._dim_size(node.args[0], dim, call)
        if call.name == "getitem":
            source = self.value(node.args[0])
            if isinstance(source, ShapeOf) and isinstance(node.args[1], int):
                return self._dim_size(source.tensor, node.args[1], call)
        if call.name == "size_arithmetic":
            raise self._error(
                f"`{call.label}`: arithmetic on sizes is not part of a row's math (n_cols alone is)", node
            )
        if call.name in ("shape", "size", "getitem", "numel", "dim", "ndim"):
            raise self._error(f"`{call.label}` ({call.name}): only the last dim's size is part of a row's math", node)
        if call.name == "arange":
            raise self._error(
                f"`{call.label}` makes indices, which kernelgen reads only as the rows of x[torch.arange(rows), target]",
                node,
            )
        return None

    def _dim_size(self, tensor: fx.Node, dim: int, call: OpCall) -> Any:
        """The size of ``dim`` of ``tensor`` in a row program: ``n_cols`` along the rows, 1 along a kept reduced dim."""
        shape = self.traced.shape(tensor)
        if shape is None:
            raise self._error(f"`{call.label}`: the size of a tensor whose shape is unknown", call.node)
        dim %= len(shape)
        if dim == len(shape) - 1 and shape[dim] == self.traced.hidden:
            return self.n
        if dim == len(shape) - 1 and shape[dim] == 1:
            return sympy.S.One
        raise self._error(
            f"`{call.label}`: dim {dim} of a {len(shape)}-d tensor; a row kernel's math reads only the last dim's "
            f"size (n_cols)",
            call.node,
        )

    # Casts -------------------------------------------------------------------------------------------------
    def dtype_of(self, node: Any) -> str:
        """``fp32`` for values the reference computes in fp32 (after an upcast), else ``input``."""
        if not isinstance(node, fx.Node):
            return _INPUT
        if node not in self.dtypes:
            call = self.traced.calls.get(node)
            if call is None:
                self.dtypes[node] = _INPUT
            elif call.family == CAST:
                self.dtypes[node] = self._cast_target(call) or self.dtype_of(call.operands[0])
            else:
                kinds = {self.dtype_of(operand) for operand in call.operands if isinstance(operand, fx.Node)}
                self.dtypes[node] = _FP32 if _FP32 in kinds else _INPUT
        return self.dtypes[node]

    def _cast_target(self, call: OpCall) -> str | None:
        """What a cast converts to: ``fp32``, ``input`` (an input's dtype), or None (a fixed low precision,
        which the kernel does not emulate)."""
        node = call.node
        fixed = fixed_cast_dtype(call)
        if fixed is not None:
            return _FP32 if fixed in _UPCASTS else None
        arguments = list(node.args[1:]) + [node.kwargs[key] for key in ("dtype", "other") if key in node.kwargs]
        for argument in arguments:
            if isinstance(argument, fx.Node):
                source = argument
                meta = self.traced.calls.get(argument)
                if meta is not None and meta.family == META and argument.args:
                    source = argument.args[0]  # x.dtype
                return self.dtype_of(source)
        return None

    def _cast(self, call: OpCall) -> sympy.Expr:
        return self.cast_value(call, self.value(call.operands[0]))

    def cast_value(self, call: OpCall, operand: Any) -> Any:
        """``operand`` (the cast's value, lowered) as the cast leaves it: rounded to the inputs' dtype after fp32
        math, truncated by an integer dtype, tested against zero by ``torch.bool``; a device move or an upcast
        changes nothing."""
        if self._cast_target(call) == _INPUT and self.dtype_of(call.operands[0]) == _FP32:
            return CastToInput(operand)
        fixed = fixed_cast_dtype(call)
        if fixed is None or fixed in _UPCASTS or is_condition(operand):
            return operand  # 0/1 values convert exactly, to any dtype
        if fixed == torch.bool:
            return apply_op("ne", operand, 0)
        source = self.traced.dtype(call.operands[0])
        if source is not None and not source.is_floating_point:
            return operand  # class indices, counts: integers convert exactly
        if not fixed.is_floating_point:
            return apply_op("trunc", operand)  # a float converts to an integer by rounding toward zero
        if getattr(sympy.sympify(operand), "is_integer", False):
            return operand
        raise AnalyzeError(
            f"`{call.label}` casts to {fixed}, a fixed precision: kernels compute in fp32 and return the inputs' "
            "dtype, so they cannot round where the reference does; cast to the inputs' dtype (`.to(x.dtype)`, "
            "`.type_as(x)`) or to fp32 instead",
            origin=self.traced.loaded.origin,
            line=node_line(call.node),
        )

    # Reductions --------------------------------------------------------------------------------------------
    def _assigned_name(self, node: fx.Node) -> str | None:
        """``variance`` for the reduction in ``variance = x.pow(2).mean(-1, keepdim=True)``: the name the reference
        gives the value, when the node is what its line computes (nothing on the same line reads it)."""
        line = node_line(node)
        if line is None or any(node_line(user) == line for user in node.users):
            return None
        return self.assignments.get(line)

    def statistic(self, base: str, reduce: str, operand: sympy.Expr, node: fx.Node) -> sympy.Symbol:
        if not (operand.free_symbols - self._row_constants()):
            raise self._error(f"a row reduction of {operand}, which does not vary along the row", node)
        for name, kind, existing in self.program.statistics:
            if kind == reduce and existing == operand:  # x.mean() written twice, or inside x.var(): reduce once
                return sympy.Symbol(name, real=True)
        name = base
        index = 0
        while name in self.taken:
            index += 1
            name = f"{base}_{index}"
        self.taken.add(name)
        symbol = sympy.Symbol(name, real=True)
        self.program.statistics.append((name, reduce, operand))
        return symbol

    def _row_constants(self) -> set[sympy.Symbol]:
        hypers = {self.symbols[name] for name in self.traced.runtime_hyperparameters}
        stats = {sympy.Symbol(name, real=True) for name, _, _ in self.program.statistics}
        scalars = {self.symbols[p.name] for p in self.traced.parameters if p.shape == "scalar"}
        return hypers | stats | scalars | {self.n}

    def _read_detached(self, node: fx.Node) -> bool:
        """Whether ``x.max(dim)`` is read only through ``.detach()`` (Megatron's max shift, ``torch.max(x, -1)[0]
        .detach()``): no gradient flows into it, so which of tied columns would take it does not matter."""
        users = [user for user in node.users if user.op != "output"]
        if not users or len(users) != len(node.users):
            return False
        for user in users:
            call = self.traced.calls.get(user)
            if call is None:
                return False
            if call.name == "detach":
                continue
            if call.name != "values" or not self._read_detached(user):  # .values / [0] of (values, indices)
                return False
        return True

    def _first_extremum(self, base: str, kind: str, x: sympy.Expr, call: OpCall) -> sympy.Symbol:
        """``x.max(dim).values`` (``kind`` max) or ``.min``: torch's backward gives the gradient to the one index
        max(dim) returns, the first column holding the extremum, where amax splits it evenly between ties (a ReLU'd
        row's zeros, bf16 values). Written as the sum of x at that column: the extremum and the first column are
        statistics of no gradient, and the sum passes its adjoint to that column alone."""
        node = call.node
        if self.traced.channel_groups is not None:
            raise self._error(
                f"`{call.label}` over groups of channels: its gradient goes to the first column holding the "
                f"{kind}imum, which a group's tiles do not number; amax/amin split it evenly between ties",
                node,
            )
        extremum = self.statistic(f"{base}_{kind}", kind, x, node)
        first = self.statistic(f"{base}_first", "min", select(sympy.Eq(x, extremum), self.col, self.n), node)
        return self.statistic(base, "sum", select(sympy.Eq(self.col, first), x, sympy.S.Zero), node)

    def _reduction(self, call: OpCall) -> sympy.Expr:
        node = call.node
        base = self._assigned_name(node) or node.name
        x = self.value(call.operands[0])
        options = call.options
        name = call.name
        if name == "sum":
            return self.statistic(base, "sum", x, node)
        if name == "mean":
            return self.statistic(base, "mean", x, node)
        if name in ("amax", "amin"):
            kind = "max" if name == "amax" else "min"
            if options.get("first_index") and not self._read_detached(node):
                return self._first_extremum(base, kind, x, call)
            return self.statistic(base, kind, x, node)
        if name in ("var", "std", "var_mean", "std_mean"):
            # Two passes (the mean, then the mean square about it): no cancellation for rows far from 0.
            correction = self._correction(call)
            mean = self.statistic(f"{base}_mean", "mean", x, node)
            variance = self.statistic(f"{base}_var", "mean", (x - mean) ** 2, node)
            if correction:
                variance = variance * self.n / (self.n - correction)
            spread = _root(variance) if name.startswith("std") else variance
            return (spread, mean) if name.endswith("_mean") else spread
        if name == "norm":
            order = options.get("p", options.get("ord", 2))
            return self._p_norm(x, 2 if order is None or order == "fro" else order, base, call)
        if name in ("logsumexp", "softmax", "log_softmax", "softmin"):
            x = -x if name == "softmin" else x
            peak = self.statistic(f"{base}_max", "max", x, node)
            total = self.statistic(f"{base}_sum", "sum", sympy.exp(x - peak), node)
            if name == "logsumexp":
                return peak + sympy.log(total)
            if name in ("softmax", "softmin"):
                return sympy.exp(x - peak) / total
            return x - peak - sympy.log(total)
        if name == "layer_norm":
            mean = self.statistic(f"{base}_mean", "mean", x, node)
            variance = self.statistic(f"{base}_var", "mean", (x - mean) ** 2, node)
            normed = (x - mean) / sympy.sqrt(variance + self._eps(call, 1e-5))
            return self._affine(call, normed)
        if name == "rms_norm":
            squares = self.statistic(f"{base}_mean_sq", "mean", x**2, node)
            normed = x / sympy.sqrt(squares + self._eps(call, float(torch.finfo(torch.float32).eps)))
            return self._affine(call, normed)
        if name == "normalize":
            norm = self._p_norm(x, options.get("p", 2), base, call)
            return x / apply_op("clamp", norm, min=to_sympy_number(self.value(options.get("eps", 1e-12))))
        if name == "cosine_similarity":
            # torch's: each row over its norm clamped below at eps, then their dot product. torch clamps the norms
            # in place under no_grad, so a row whose norm is below eps divides by eps but takes the gradient of
            # its unclamped norm: norm + detach(clamp(norm) - norm) has that value and that gradient.
            other = self.value(call.operands[1])
            eps = to_sympy_number(self.value(options.get("eps", 1e-8)))
            units = []
            for index, row in enumerate((x, other), start=1):
                norm = _root(self.statistic(f"{base}_{index}_sum_sq", "sum", row**2, node))
                units.append(row / (norm + apply_op("detach", apply_op("clamp", norm, min=eps) - norm)))
            return self.statistic(base, "sum", units[0] * units[1], node)
        raise self._error(f"`{call.label}` ({name}) is a reduction kernelgen cannot write out", node)

    def _p_norm(self, x: sympy.Expr, order: Any, base: str, call: OpCall) -> sympy.Expr:
        """The p-norm of the row (``torch.norm``, ``linalg.vector_norm``, ``F.normalize``'s divisor): the largest
        magnitude for p = inf, else the p-th root of the sum of magnitudes to the p."""
        node = call.node
        if isinstance(order, float) and order.is_integer():
            order = int(order)
        if order in (float("inf"), "inf"):
            return self.statistic(f"{base}_max_abs", "max", sympy.Abs(x), node)
        if order == 1:
            return self.statistic(f"{base}_sum_abs", "sum", sympy.Abs(x), node)
        if order == 2:
            return _root(self.statistic(f"{base}_sum_sq", "sum", x**2, node))
        if isinstance(order, (int, float)) and not isinstance(order, bool) and order > 0:
            power = sympy.nsimplify(order)
            return _root(self.statistic(f"{base}_sum_pow", "sum", sympy.Abs(x) ** power, node), power)
        if isinstance(order, fx.Node):
            order = self.value(order)
        if isinstance(order, sympy.Symbol):
            # A hyper-parameter's order (``p: float = 3.0``): the sum of magnitudes to the p, its p-th root; 1, 2
            # and inf are then the same formula's values (inf excepted: pass p=float("inf") written in the call).
            return _root(self.statistic(f"{base}_sum_pow", "sum", sympy.Abs(x) ** order, node), order)
        raise self._error(
            f"`{call.label}` with p={order!r}: the norm's order is a positive number or a float hyper-parameter", node
        )

    def _correction(self, call: OpCall) -> int:
        return variance_correction(call)

    def _eps(self, call: OpCall, default: float):
        eps = call.options.get("eps")
        return to_sympy_number(self.value(eps) if eps is not None else default)

    def _affine(self, call: OpCall, normed: sympy.Expr) -> sympy.Expr:
        """``normed * weight + bias`` of a norm call or module (either may be absent)."""
        node = call.node
        if node.op == "call_module":
            weight = f"{node.target}.weight"
            bias = f"{node.target}.bias"
            weight = self._parameter(weight, node) if weight in self.traced.parameter_names else None
            bias = self._parameter(bias, node) if bias in self.traced.parameter_names else None
        else:
            weight, bias = call.options.get("weight"), call.options.get("bias")
            weight = self.value(weight) if weight is not None else None
            bias = self.value(bias) if bias is not None else None
        if weight is not None:
            normed = normed * weight
        if bias is not None:
            normed = normed + bias
        return normed


def _root(value: sympy.Expr, power=2) -> sympy.Expr:
    """``value ** (1 / power)`` of a std or norm, with a gradient of 0 where ``value`` is 0, as torch's std and
    norm backwards mask it (a constant row's std, a zero row's norm): the plain root's derivative is 1 / 0 there."""
    return apply_op("root", value, sympy.sympify(power))


def _single_name_assignments(source: str) -> dict[int, str]:
    """Line -> target of each one-line ``name = value`` statement of the reference."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.lineno == node.end_lineno:
                found[node.lineno] = node.targets[0].id
    return found


def lower(traced: TracedReference) -> LoweredProgram:
    """The row program of ``traced`` (tier 1: no statistics)."""
    builder = ProgramBuilder(traced)
    program = builder.program
    for name, node in zip(traced.output_names, traced.outputs):
        program.outputs[name] = as_stored(builder.value(node))
        shape = traced.shape(node)
        program.keepdim[name] = shape is None or len(shape) == traced.rank
    return program
