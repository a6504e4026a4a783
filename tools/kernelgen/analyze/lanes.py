"""Index maps within a row: a reference that reads other positions of its row (GLU halves taken by slicing,
gpt-oss's interleaved ``x[..., ::2]`` / ``x[..., 1::2]``, ``rotate_half``'s ``torch.cat((-x2, x1), dim=-1)``,
``flip``) lowered to lanes.

Each tensor input's row of ``H`` elements is cut into ``M`` lanes of ``S = H / M`` elements: blocked (lane ``k`` is
``x[..., k * S : (k + 1) * S]``) or strided (lane ``k`` is ``x[..., k::M]``), each input its own way (Helium's RoPE
takes the first half of ``cos`` and repeats each element twice to meet ``q``'s interleaved pairs). Every value the reference computes on
a row is then a list of lanes, each an element-wise expression of input lanes at the same lane index ``j``: slices,
chunks, splits, concatenations, flips, stack-then-flatten and ``repeat_interleave`` only regroup the lanes, so the whole reference becomes
an element-wise program over ``j < S``. A lane of a tensor is a ``LaneMap``: element ``j`` of it lies at row
position ``start_lanes * S + offset + step * j``; an output's lanes say where each of its elements is stored, so
the forward gathers from the inputs and stores each output position once.

Shape arithmetic (``x.shape[-1] // 2``, ``x.size(-1)``) is evaluated with ``S`` a positive integer symbol, so a
bound is a lane boundary exactly when it is a whole multiple of ``S``. ``M`` and the cuts are the first of a few
candidates (every input cut alike before inputs cut differently) under which every index of the reference falls on
lane boundaries; a reference no candidate fits is
refused naming the index and its line.

The backward is the transposed map: the gradient of each input lane is derived element-wise (a sum over the output
lanes that read it) and stored at that lane's positions, plain stores (no atomics). Lanes of one tensor that read
the same positions (``x * x.flip(-1)``) store into separate buffers the host adds up; positions no lane reads get
zero.
"""

from __future__ import annotations

import itertools
import operator

from dataclasses import dataclass
from dataclasses import field
from typing import Any

import sympy
import torch.fx as fx

from tools.kernelgen.analyze.classify import indexes_an_argument
from tools.kernelgen.analyze.errors import HAND_WRITTEN_PROFILE_HINT
from tools.kernelgen.analyze.errors import AnalyzeError
from tools.kernelgen.analyze.ops import CAST
from tools.kernelgen.analyze.ops import ELEMENTWISE
from tools.kernelgen.analyze.ops import INDEX_MAP_OPS
from tools.kernelgen.analyze.ops import LAYOUT
from tools.kernelgen.analyze.ops import META
from tools.kernelgen.analyze.ops import REDUCTION
from tools.kernelgen.analyze.ops import STRUCTURAL
from tools.kernelgen.analyze.ops import node_line
from tools.kernelgen.analyze.program import ProgramBuilder
from tools.kernelgen.analyze.program import ShapeOf
from tools.kernelgen.analyze.trace import TracedReference
from tools.kernelgen.broadcast import BROADCAST as BROADCAST_DIM
from tools.kernelgen.broadcast import INSERTED as INSERTED_DIM
from tools.kernelgen.broadcast import narrowing
from tools.kernelgen.lane_maps import LaneMap
from tools.kernelgen.synth import SUPPORTED_OPS
from tools.kernelgen.synth import apply_op
from tools.kernelgen.synth.derive import derive_elementwise
from tools.kernelgen.synth.functions import as_stored

BLOCKED, STRIDED = "blocked", "strided"
LANE_COUNTS = (1, 2, 4, 8)
# Inputs cut differently are tried for references of at most this many tensor inputs (2 ** inputs cuts a count).
MIXED_CUT_INPUTS = 6
LANE_LENGTH = sympy.Symbol("S", integer=True, positive=True)


@dataclass
class Row:
    """A value over the row as lanes (element-wise expressions at lane index ``j``), in the arrangement ``kind``:
    blocked, strided, or (an int ``g``) blocks of ``g`` strided lanes, lane ``b * g + i`` at ``b * g * S + i + g * j``
    (GLM's first half of ``q`` taken as pairs: ``q[..., :d][..., 0::2]``)."""

    lanes: tuple[Any, ...]
    kind: str | int

    def arrangement(self) -> str | int:
        return BLOCKED if len(self.lanes) == 1 else self.kind

    def group(self) -> int:
        """The lanes a block of this arrangement holds: 1 blocked, all of them strided."""
        kind = self.arrangement()
        return 1 if kind == BLOCKED else len(self.lanes) if kind == STRIDED else kind


def _grouped(lanes: tuple, group: int) -> Row:
    """A row of ``lanes`` in blocks of ``group`` strided lanes, named blocked or strided where it is one of those."""
    return Row(lanes, BLOCKED if group == 1 or len(lanes) == 1 else STRIDED if group == len(lanes) else group)


def lane_map(tensor: str, lane: int, group: int) -> LaneMap:
    """Where lane ``lane`` of a row in blocks of ``group`` strided lanes lies."""
    return LaneMap(tensor, lane // group * group, lane % group, group)


@dataclass(frozen=True)
class _Stacked:
    """``torch.stack(rows, dim=-1)``: rows side by side along a new last dim, until a flatten interleaves them."""

    rows: tuple[Row, ...]


@dataclass
class LaneProgram:
    """A reference lowered to lanes: the cut of its inputs, each input lane's symbol and map, each output lane's
    formula and map (the gradients are derived from the profile's formulas, as any tier-1 kernel's)."""

    kind: str  # how the inputs' rows are cut: "blocked", "strided", or each input's cut where they differ
    lanes: int  # lanes per input row
    input_lanes: dict[str, LaneMap] = field(default_factory=dict)  # lane symbol -> where it is read
    output_lanes: dict[str, LaneMap] = field(default_factory=dict)  # lane name -> where it is stored
    outputs: dict[str, sympy.Expr] = field(default_factory=dict)  # lane name -> formula over input lanes
    # further row groups: the first group's tensors of rows -> each group's own (see ``_row_groups``)
    groups: list[dict[str, str]] = field(default_factory=list)


class _Misfit(Exception):
    """An index of the reference that does not fall on the lane boundaries of the cut tried."""

    def __init__(self, message: str, node: fx.Node):
        super().__init__(message)
        self.message = message
        self.node = node


class LaneBuilder(ProgramBuilder):
    """``ProgramBuilder`` whose row values are ``Row``s of lanes under one cut of the inputs (``cuts``: each tensor
    input's, blocked or strided)."""

    def __init__(self, traced: TracedReference, cuts: dict[str, str], lanes: int):
        super().__init__(traced)
        self.cuts = cuts
        self.count = lanes
        self.maps: dict[str, LaneMap] = {}  # lane symbol name -> map
        self.by_map: dict[LaneMap, sympy.Symbol] = {}

    def lane_symbol(self, lane: LaneMap) -> sympy.Symbol:
        if lane not in self.by_map:
            base = f"{lane.tensor}_{len([m for m in self.maps.values() if m.tensor == lane.tensor])}"
            name = base
            while name in self.taken:
                name += "_"
            self.taken.add(name)
            self.maps[name] = lane
            self.by_map[lane] = sympy.Symbol(name, real=True)
        return self.by_map[lane]

    def input_row(self, name: str) -> Row:
        """The lanes of input ``name``: ``count`` of them, fewer for an input of shorter rows (GPT-J's half-width
        sin: one lane where its row is half as long as the first input's cut into two)."""
        kind, factor = self.cuts[name], narrowing(self.traced.broadcast_inputs.get(name, ""))
        if self.count % factor:
            node = next(n for n, placeholder in self.traced.placeholder_names.items() if placeholder == name)
            raise _Misfit(f"{name}'s rows, {factor} times shorter than the first input's, hold no whole lane", node)
        count = self.count // factor
        group = 1 if kind == BLOCKED else count if kind == STRIDED else kind
        if count % group:
            node = next(n for n, placeholder in self.traced.placeholder_names.items() if placeholder == name)
            raise _Misfit(f"{name}'s {count} lanes do not fall into blocks of {group}", node)
        maps = [lane_map(name, k, group) for k in range(count)]
        return _grouped(tuple(self.lane_symbol(lane) for lane in maps), group)

    # Values ------------------------------------------------------------------------------------------------
    def _node(self, node: fx.Node) -> Any:
        value = self._lane_node(node)
        if isinstance(value, Row):
            self._check_shape(node, value)
        return value

    def _check_shape(self, node: fx.Node, row: Row) -> None:
        """The traced shape of a row value: the inputs' rows, ``len(row.lanes)`` lanes long, or a shape that
        broadcasts against them (``cos.unsqueeze(1)`` of an input that broadcasts). Any other (a value the
        reference broadcasts to more rows than the inputs have) is refused naming the op that made it."""
        shape = self.traced.shape(node)
        if shape is None or node.op == "placeholder":
            return
        rows = self.traced.shape(
            next(n for n, name in self.traced.placeholder_names.items() if name in self.traced.tensor_inputs)
        )
        lane_length = self.traced.hidden // self.count
        expected = (*rows[:-1], len(row.lanes) * lane_length) if rows is not None else None
        if expected is not None and _broadcast_to(tuple(shape), expected) != expected:
            call = self.traced.calls.get(node)
            label = f"`{call.label}`" if call is not None else f"`{node.name}`"
            raise self._error(
                f"{label} gives a value of shape {list(shape)}, not rows like the inputs' {list(rows[:-1])}: an index "
                "map reads tensors of the inputs' rows or of shapes that broadcast against them",
                node,
            )

    def _lane_node(self, node: fx.Node) -> Any:
        if node.op == "placeholder":
            name = self.traced.placeholder_names[node]
            return self.input_row(name) if name in self.traced.tensor_inputs else self.symbols[name]
        if node.op == "get_attr":
            raise self._error(
                f"`self.{node.target}` is a parameter read in a reference that moves elements within the row; "
                "index-mapped kernels take tensor inputs and hyper-parameters only",
                node,
            )
        call = self.traced.calls[node]
        if call.family == META:
            return self._lane_meta(call)
        if call.family == CAST:
            return _lanewise(lambda value: self.cast_value(call, value), self.value(call.operands[0]))
        if call.name in INDEX_MAP_OPS:
            return self._index_map(call)
        if call.family == LAYOUT:
            source = self.value(call.operands[0])
            if isinstance(source, _Stacked) and call.name in ("flatten", "view", "reshape"):
                return self._interleave(source, call)
            if isinstance(source, _Stacked):
                raise _Misfit(f"`{call.label}` of a stack", node)
            return source
        if call.family != ELEMENTWISE or call.name not in SUPPORTED_OPS:
            raise self._error(f"`{call.label}` ({call.name}) is not element-wise-synthesizable", node)
        operands = [self.value(operand) for operand in call.operands]
        options = {key: self.value(option) for key, option in call.options.items()}
        rows = [value for value in [*operands, *options.values()] if isinstance(value, Row)]
        if not rows:
            return apply_op(call.name, *operands, **options)
        width = {len(row.lanes) for row in rows}
        kinds = {row.arrangement() for row in rows if len(row.lanes) > 1}
        if len(width) > 1:
            message = f"`{call.label}` combines values of different row lengths ({sorted(width)} lanes)"
            if not self.traced.shapes_known:
                first = next(name for name in self.traced.tensor_inputs if name not in self.traced.index_inputs)
                message += (
                    f": the reference does not run with every input as wide as {first}'s rows, and an index map "
                    "reads inputs of that width only; pass a narrower input (GPT-J's half-width sin and cos) laid "
                    "out at the row's width by the caller"
                )
            raise self._error(message, node)
        if len(kinds) > 1:
            raise _Misfit(f"`{call.label}` combines rows cut into lanes of different arrangements", node)
        result = []
        for index in range(width.pop()):

            def lane(value):
                return value.lanes[index] if isinstance(value, Row) else value

            try:
                result.append(apply_op(call.name, *map(lane, operands), **{key: lane(v) for key, v in options.items()}))
            except (ValueError, TypeError) as error:
                raise self._error(f"`{call.label}`: {error}", node) from None
        return Row(tuple(result), kinds.pop() if kinds else BLOCKED)

    # Sizes -------------------------------------------------------------------------------------------------
    def _lane_meta(self, call) -> Any:
        """Sizes as expressions of the lane length: ``x.shape[-1]`` of a row of ``m`` lanes is ``m * S``, and
        ``//`` and ``%`` of sizes are evaluated (``S`` is a positive integer)."""
        node = call.node
        if call.name == "size_arithmetic":
            left, right = (self.value(arg) for arg in node.args[:2])
            op = {operator.floordiv: lambda a, b: sympy.floor(a / b), operator.mod: sympy.Mod}.get(node.target)
            if op is None or isinstance(left, (Row, ShapeOf)) or isinstance(right, (Row, ShapeOf)):
                raise self._error(f"`{call.label}`: arithmetic on sizes other than // and %", node)
            return op(sympy.sympify(left), sympy.sympify(right))
        return self._meta(call)

    def _dim_size(self, tensor: fx.Node, dim: int, call) -> Any:
        """The size of ``dim`` of ``tensor``: of the last, the lanes of its row times the lane length."""
        shape = self.traced.shape(tensor)
        rank = len(shape) if shape is not None else self.traced.rank
        if dim % rank != rank - 1:
            raise self._error(f"`{call.label}`: only the last dim's size is part of a row's math", call.node)
        value = self.value(tensor)
        if not isinstance(value, Row):
            raise self._error(f"`{call.label}`: the size of a value that is not a row", call.node)
        return len(value.lanes) * LANE_LENGTH

    # Index maps --------------------------------------------------------------------------------------------
    def _whole_lanes(self, bound: Any, width: int, call) -> int:
        """A slice bound (None, a number or a size expression; negative from the end) in lanes."""
        if bound is None:
            return None
        value = sympy.sympify(self.value(bound))
        if value.is_negative or (value.is_number and value < 0):
            value = value + width * LANE_LENGTH
        lanes = sympy.simplify(value / LANE_LENGTH)
        if not lanes.is_Integer:
            raise _Misfit(f"`{call.label}` cuts the row at {value}, not at a lane boundary", call.node)
        return max(0, min(int(lanes), width))

    def _slice_row(self, row: Row, index: slice, call) -> Row:
        width = len(row.lanes)
        step = 1 if index.step is None else self.value(index.step)
        if not isinstance(step, int) or step <= 0:
            raise self._error(f"`{call.label}`: a slice step that is not a positive integer", call.node)
        if step == 1:
            start = self._whole_lanes(index.start, width, call) or 0
            stop = self._whole_lanes(index.stop, width, call)
            stop = width if stop is None else stop
            group = row.group()
            if start % group or stop % group:
                raise _Misfit(f"`{call.label}` takes a block of a row cut into strided lanes", call.node)
            return _grouped(row.lanes[start:stop], group)
        # x[..., k::s]: every s-th element from k, which strided lanes k, k + s, ... hold
        start = 0 if index.start is None else self.value(index.start)
        group = row.group()
        if width == 1 or group == 1 or group % step or index.stop is not None:
            raise _Misfit(f"`{call.label}` takes one element in {step}, which this cut's lanes do not", call.node)
        if not isinstance(start, int) or not 0 <= start < step:
            raise self._error(f"`{call.label}`: a strided slice must start at 0..{step - 1}", call.node)
        # every step-th element from start: in each block, the strided lanes start, start + step, ...
        return _grouped(row.lanes[start::step], group // step)

    def _index_map(self, call) -> Any:
        node = call.node
        source = self.value(call.operands[0]) if call.operands else None
        name = call.name
        if name == "getitem":  # a piece of a chunk / split
            return source[call.options["index"]]
        if name == "slice":
            return self._slice(call, source)
        if name == "flip":
            dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
            dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
            self._last_dim_only(call, dims)
            self._require_row(call, source)
            reversed_lanes = tuple(self._reversed(lane) for lane in reversed(source.lanes))
            return Row(reversed_lanes, source.kind)
        if name == "repeat_interleave":
            return self._repeat_each(call, source)
        if name == "narrow":  # x.narrow(dim, start, length): the slice start:start + length of dim
            arguments = [*node.args[1:], *(node.kwargs[k] for k in ("dim", "start", "length") if k in node.kwargs)]
            dim, start, length = arguments
            self._last_dim_only(call, (dim,))
            self._require_row(call, source)
            return self._slice_row(source, slice(start, self.value(start) + self.value(length)), call)
        if name in ("chunk", "split"):
            self._require_row(call, source)
            arguments = list(node.args[1:])
            amount = arguments[0] if arguments else node.kwargs.get("chunks", node.kwargs.get("split_size_or_sections"))
            dim = arguments[1] if len(arguments) > 1 else node.kwargs.get("dim", 0)
            self._last_dim_only(call, (dim,))
            return self._pieces(call, source, amount)
        if name in ("cat", "stack"):
            tensors = node.args[0] if node.args else node.kwargs.get("tensors")
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
            self._last_dim_only(call, (dim,))
            rows = [self.value(item) for item in tensors]
            for row in rows:
                self._require_row(call, row)
            if name == "stack":
                return _Stacked(tuple(rows))
            # rows in blocks of one size join into a row of those blocks (GLM's rotated half beside the rest)
            groups = {row.group() for row in rows}
            if len(rows) > 1 and len(groups) > 1 and not groups <= {1}:
                raise _Misfit(f"`{call.label}` joins rows cut into strided lanes", node)
            return _grouped(tuple(lane for row in rows for lane in row.lanes), groups.pop() if len(groups) == 1 else 1)
        raise self._error(f"`{call.label}` ({name}) moves elements in a way lanes do not express", node)

    def _slice(self, call, source) -> Row:
        index = call.options["index"]
        items = list(index) if isinstance(index, tuple) else [index]
        self._require_row(call, source)
        if items and items[0] is Ellipsis:
            items = items[1:]
        else:
            shape = self.traced.shape(call.operands[0])
            rank = len(shape) if shape is not None else self.traced.rank
            if len(items) != rank or any(item != slice(None) for item in items[:-1]):
                raise self._error(f"`{call.label}` indexes a dim other than the last (the row)", call.node)
            items = items[-1:]
        if len(items) != 1 or not isinstance(items[0], slice):
            raise self._error(f"`{call.label}` indexes the row by other than one slice", call.node)
        return self._slice_row(source, items[0], call)

    def _pieces(self, call, row: Row, amount) -> tuple[Row, ...]:
        width = len(row.lanes)
        group = row.group()
        if call.name == "chunk":
            count = self.value(amount)
            if not isinstance(count, int) or count <= 0 or width % count:
                raise _Misfit(f"`{call.label}` makes {count} chunks of the row", call.node)
            size = width // count
            if size % group:
                raise _Misfit(f"`{call.label}` splits a row cut into strided lanes into blocks", call.node)
            return tuple(_grouped(row.lanes[k * size : (k + 1) * size], group) for k in range(count))
        sizes = amount if isinstance(amount, (list, tuple)) else None
        if sizes is None:
            size = self._whole_lanes(amount, width, call)
            if not size:
                raise _Misfit(f"`{call.label}` splits into pieces of no whole lane", call.node)
            sizes = [size] * (width // size) + ([width % size] if width % size else [])
        else:
            sizes = [self._whole_lanes(size, width, call) for size in sizes]
        if any(size % group for size in sizes):
            raise _Misfit(f"`{call.label}` splits a row cut into strided lanes into blocks", call.node)
        pieces, start = [], 0
        for size in sizes:
            pieces.append(_grouped(row.lanes[start : start + size], group))
            start += size
        return tuple(pieces)

    def _repeat_each(self, call, row: Row) -> Row:
        """``row.repeat_interleave(r, dim=-1)``: each element ``r`` times in a row. Of a row of one lane or of strided
        lanes (``k + m * j``) the copy ``i`` of lane ``k`` lies at ``r * k + i + r * m * j``: strided lane ``r * k + i``
        of ``r * m``; blocked lanes of more than one repeat into no lanes."""
        node = call.node
        arguments = [*node.args[1:], *(node.kwargs[k] for k in ("repeats", "dim") if k in node.kwargs)]
        repeats = self.value(arguments[0]) if arguments else None
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats <= 0:
            raise self._error(f"`{call.label}`: repeats must be a positive integer, not a tensor of counts", node)
        if len(arguments) < 2 or arguments[1] is None:
            raise self._error(
                f"`{call.label}` without dim repeats the flattened tensor; an index map repeats within the row (dim=-1)",
                node,
            )
        self._last_dim_only(call, (arguments[1],))
        self._require_row(call, row)
        if len(row.lanes) > 1 and row.group() == 1:
            raise _Misfit(f"`{call.label}` repeats each element of a row cut into blocked lanes", node)
        # copy c of lane i of a block of g lies at lane r * i + c of a block of r * g
        return _grouped(tuple(lane for lane in row.lanes for _ in range(repeats)), repeats * row.group())

    def _interleave(self, stacked: _Stacked, call) -> Row:
        """``stack(rows, -1)`` then flattened back into the row: element ``j`` of each row side by side."""
        if any(len(row.lanes) != 1 for row in stacked.rows):
            raise _Misfit(f"`{call.label}` interleaves rows of more than one lane", call.node)
        return Row(tuple(row.lanes[0] for row in stacked.rows), STRIDED)

    def _reversed(self, expression: Any) -> Any:
        if not isinstance(expression, sympy.Basic):
            return expression
        swaps = {}
        for symbol in expression.free_symbols:
            lane = self.maps.get(symbol.name)
            if lane is not None:
                swaps[symbol] = self.lane_symbol(lane.reversed())
        return expression.xreplace(swaps)

    def _require_row(self, call, value: Any) -> None:
        if not isinstance(value, Row):
            raise self._error(f"`{call.label}` moves elements of a value that is not a row of the inputs", call.node)

    def _last_dim_only(self, call, dims: tuple) -> None:
        shape = self.traced.shape(call.operands[0]) if call.operands else None
        rank = len(shape) if shape is not None else self.traced.rank
        for dim in dims:
            if not isinstance(dim, int) or dim % rank != rank - 1:
                raise self._error(f"`{call.label}` moves elements along dim {dim}, not the last (the row)", call.node)


def _lanewise(function, value: Any) -> Any:
    if isinstance(value, Row):
        return Row(tuple(function(lane) for lane in value.lanes), value.kind)
    return function(value)


def moves_elements(traced: TracedReference, classification) -> bool:
    """Whether the reference is element-wise but for regrouping its row (slices, chunks, splits, cat, stack,
    flip): classified tier 3 for such an op alone, no reductions, no scalar indexing of a tensor argument."""
    if classification.tier != 3 or classification.call is None:
        return False
    calls = list(traced.calls.values())
    structural = [call for call in calls if call.family == STRUCTURAL]
    if any(call.name not in INDEX_MAP_OPS or indexes_an_argument(call) for call in structural):
        return False
    return bool(structural) and not any(call.family == REDUCTION for call in calls)


def lanes_reason(traced: TracedReference, program: LaneProgram) -> str:
    """The tier reason of a reference lowered to lanes: which ops move elements, and the cut of the row."""
    moving = [call for call in traced.calls.values() if call.family == STRUCTURAL and call.name in INDEX_MAP_OPS]
    labels = ", ".join(dict.fromkeys(f"`{call.label}`" for call in moving if call.name != "getitem"))
    lines = sorted({call.line for call in moving if call.line is not None})
    where = f" (line {', '.join(map(str, lines))})" if lines else ""
    if program.lanes == 1:
        cut = "one lane"
    elif program.kind in (BLOCKED, STRIDED):
        cut = f"{program.lanes} {program.kind} lanes"
    else:
        cut = f"{program.lanes} lanes: {program.kind}"
    shorter = {name: narrowing(p) for name, p in traced.broadcast_inputs.items() if narrowing(p) > 1}
    for factor in sorted(set(shorter.values())):
        names = ", ".join(name for name in shorter if shorter[name] == factor)
        held = program.lanes // factor
        cut += f"; {names}: rows {factor} times shorter, {'one lane' if held == 1 else f'{held} lanes'}"
    return (
        f"{labels}{where} move elements within the row: an index map over lanes (each input row cut into {cut}), "
        "element-wise over the lane index."
    )


def lower_lanes(traced: TracedReference) -> LaneProgram:
    """The lane program of ``traced`` under the first cut that fits; AnalyzeError naming the index and its line
    when none does."""
    # one value per row: a last dim of 1, or one the reference inserts (``scale.unsqueeze(-1)``)
    per_row = [name for name, p in traced.broadcast_inputs.items() if p.split()[-1] in (BROADCAST_DIM, INSERTED_DIM)]
    if per_row:
        node = next(n for n, name in traced.placeholder_names.items() if name == per_row[0])
        use = next((traced.calls[user] for user in node.users if user in traced.calls), None)
        moving = next(c for c in traced.calls.values() if c.family == STRUCTURAL and c.name in INDEX_MAP_OPS)
        raise AnalyzeError(
            f"`{(use or moving).label}` reads {per_row[0]} as one value per row "
            f"({traced.broadcast_inputs[per_row[0]]!r}) in a reference whose `{moving.label}` moves elements within "
            f"the row: an index map cuts every input's row into lanes, which a row of one value has not; give "
            f"{per_row[0]} the row's length, {HAND_WRITTEN_PROFILE_HINT}",
            origin=traced.loaded.origin,
            line=(use or moving).line,
        )
    order = {node: index for index, node in enumerate(traced.graph_module.graph.nodes)}
    furthest = None  # the misfit of the cut that went furthest through the reference names what no cut expresses
    for cuts, count in _candidate_cuts(traced.tensor_inputs):
        try:
            return _lower(traced, cuts, count)
        except _Misfit as misfit:
            if furthest is None or order[misfit.node] > order[furthest.node]:
                furthest = misfit
    raise AnalyzeError(
        f"{furthest.message}: an index map kernelgen expresses cuts the row into equal lanes (halves, "
        f"quarters, every 2nd or 4th element) and regroups them; rewrite the index so, {HAND_WRITTEN_PROFILE_HINT}",
        origin=traced.loaded.origin,
        line=node_line(furthest.node),
    )


def _candidate_cuts(inputs: list[str]):
    """The cuts tried, in order: the fewest lanes first; at each count every input blocked, every input strided,
    then (for a few inputs) each mix of the two."""
    for count in LANE_COUNTS:
        if count == 1:
            yield dict.fromkeys(inputs, BLOCKED), count
            continue
        yield dict.fromkeys(inputs, BLOCKED), count
        yield dict.fromkeys(inputs, STRIDED), count
        # blocks of strided lanes between the two (four lanes: pairs of strided lanes, GLM's half-rotated q)
        groups = [group for group in LANE_COUNTS if 1 < group < count and count % group == 0]
        yield from ((dict.fromkeys(inputs, group), count) for group in groups)
        if 1 < len(inputs) <= MIXED_CUT_INPUTS:
            for kinds in itertools.product((BLOCKED, STRIDED, *groups), repeat=len(inputs)):
                if len(set(kinds)) > 1:
                    yield dict(zip(inputs, kinds)), count


def _cut_description(cuts: dict[str, str]) -> str:
    """``blocked`` / ``strided`` where every input is cut alike, else each input's (``q, k strided; cos blocked``)."""

    def named(kind) -> str:
        return kind if kind in (BLOCKED, STRIDED) else f"in blocks of {kind} strided"

    kinds = list(dict.fromkeys(cuts.values()))
    if len(kinds) == 1:
        return named(kinds[0])
    order = [STRIDED, *sorted(k for k in kinds if k not in (BLOCKED, STRIDED)), BLOCKED]
    return "; ".join(
        f"{', '.join(n for n in cuts if cuts[n] == kind)} {named(kind)}" for kind in order if kind in kinds
    )


def _lower(traced: TracedReference, cuts: dict[str, str], count: int) -> LaneProgram:
    builder = LaneBuilder(traced, cuts, count)
    program = LaneProgram(kind=_cut_description(cuts), lanes=count)
    for name, node in zip(traced.output_names, traced.outputs):
        row = builder.value(node)
        if not isinstance(row, Row):
            raise builder._error("an output that is not a row of the inputs' rows", node)
        for k, lane in enumerate(map(as_stored, row.lanes)):
            lane_name = f"{name}_{k}"
            while lane_name in builder.taken or f"grad_{lane_name}" in builder.taken:
                lane_name += "_"  # an input's lane (or its gradient) of that name
            builder.taken.add(lane_name)
            where = lane_map(name, k, row.group())
            program.output_lanes[lane_name] = where
            program.outputs[lane_name] = sympy.sympify(lane)
    program.groups = _row_groups(traced, builder, program)
    read = set().union(*(expr.free_symbols for expr in program.outputs.values()))
    program.input_lanes = {name: lane for name, lane in builder.maps.items() if sympy.Symbol(name, real=True) in read}
    # Simplified as the derivation simplifies them (bounded ops, shared transcendentals), which the profile writes.
    derivation = derive_elementwise(
        program.outputs, list(program.input_lanes), hyperparameters=traced.runtime_hyperparameters
    )
    program.outputs = dict(derivation.forward)
    return program


def _row_groups(traced: TracedReference, builder: LaneBuilder, program: LaneProgram) -> list[dict[str, str]]:
    """Outputs computed from inputs of rows no other output reads, each the same program up to the names (HF
    RoPE's ``q_embed`` of ``q`` and ``k_embed`` of ``k``, the inputs that broadcast shared): such a group's rows
    need not be the first group's (``k`` has other heads than ``q``), and one launch walks them all with the first
    group's math. ``program`` keeps the first group's lanes; -> each further group's renaming of the first group's
    tensors, empty (one group of one shape, as before) where the outputs share their inputs or compute differently."""
    shared = set(traced.broadcast_inputs)
    components: list[tuple[list[str], list[str]]] = []  # (inputs of rows, outputs), in the reference's order
    for output in traced.output_names:
        formulas = [expr for name, expr in program.outputs.items() if program.output_lanes[name].tensor == output]
        symbols = set().union(*(sympy.sympify(expr).free_symbols for expr in formulas))
        read = {builder.maps[s.name].tensor for s in symbols if s.name in builder.maps} - shared
        joined = [c for c in components if read & set(c[0])]
        inputs = [name for name in traced.tensor_inputs if name in read or any(name in c[0] for c in joined)]
        outputs = [name for c in joined for name in c[1]] + [output]
        components = [c for c in components if c not in joined] + [(inputs, outputs)]
    if len(components) < 2 or any(not inputs for inputs, _ in components):
        return []
    first_inputs, first_outputs = components[0]
    renamings = []
    for inputs, outputs in components[1:]:
        if len(inputs) != len(first_inputs) or len(outputs) != len(first_outputs):
            return []
        renaming = dict(zip(first_inputs + first_outputs, inputs + outputs))
        if not _same_program(builder, program, renaming):
            return []
        renamings.append(renaming)
    kept = {name for name, lane in program.output_lanes.items() if lane.tensor in first_outputs}
    program.output_lanes = {name: lane for name, lane in program.output_lanes.items() if name in kept}
    program.outputs = {name: expr for name, expr in program.outputs.items() if name in kept}
    return renamings


def _same_program(builder: LaneBuilder, program: LaneProgram, renaming: dict[str, str]) -> bool:
    """Whether every output lane of the first group, renamed, is stored at the same positions as a lane of the
    renamed group whose formula is the first one's over the renamed input lanes."""
    by_place = {
        (lane.tensor, lane.start_lanes, lane.offset, lane.step): name for name, lane in program.output_lanes.items()
    }
    lanes = [lane.tensor for lane in program.output_lanes.values()]
    if any(lanes.count(name) != lanes.count(renamed) for name, renamed in renaming.items()):
        return False  # an output of the group with more or fewer lanes than its counterpart
    for name, lane in program.output_lanes.items():
        if lane.tensor not in renaming:
            continue
        other = by_place.get((renaming[lane.tensor], lane.start_lanes, lane.offset, lane.step))
        if other is None:
            return False
        swaps = {}
        for symbol in sympy.sympify(program.outputs[name]).free_symbols:
            read = builder.maps.get(symbol.name)
            if read is not None and read.tensor in renaming:
                renamed = LaneMap(renaming[read.tensor], read.start_lanes, read.offset, read.step)
                if renamed not in builder.by_map:
                    return False
                swaps[symbol] = builder.by_map[renamed]
        if sympy.simplify(sympy.sympify(program.outputs[name]).xreplace(swaps) - sympy.sympify(program.outputs[other])):
            return False
    return True


def _broadcast_to(shape: tuple[int, ...], rows: tuple[int, ...]) -> tuple[int, ...] | None:
    """``shape`` broadcast against ``rows`` as torch does; None where the two do not broadcast."""
    if len(shape) > len(rows):
        return None
    padded = (1,) * (len(rows) - len(shape)) + shape
    if any(size not in (1, full) and full != 1 for size, full in zip(padded, rows)):
        return None
    return tuple(max(size, full) for size, full in zip(padded, rows))


__all__ = ["LANE_LENGTH", "LaneProgram", "lower_lanes", "moves_elements"]
