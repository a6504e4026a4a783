"""The lines of a tier-1 ops file whose profile has lanes (``math.lanes``: an index map within the row): the kernels
run over the lane index ``lane`` (``n_cols`` is the lane length), load each input lane and store each output lane at
the positions its map gives, and the backward stores each input lane's gradient where the lane was read."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen.broadcast import narrowed_shape_expression
from tools.kernelgen.broadcast import narrowing
from tools.kernelgen.lane_maps import LaneMap
from tools.kernelgen.lane_maps import covers_row
from tools.kernelgen.lane_maps import disjoint_layers
from tools.kernelgen.lane_maps import parse_lane
from tools.kernelgen.profile import KernelProfile

# The lane index of a tile's columns: pointers move by rows only, the maps are affine in it.
LANE_INDEX = "lane"


@dataclass(frozen=True)
class LaneOpsView:
    count: int  # lanes per input row
    forward_loads: list[str]
    forward_stores: list[str]
    forward_pointer_moves: list[str]
    backward_loads: list[str]
    backward_stores: list[str]
    backward_pointer_moves: list[str]
    host_checks: list[str]  # the forward wrapper's check that rows hold whole lanes, and n_cols
    backward_lane_length: str  # the backward wrapper's n_cols, from the first upstream gradient
    output_allocations: list[str]
    grad_output_rows: list[str]
    gradient_buffers: list[str]
    outputs_viewed: list[str]
    gradients_viewed: list[str]
    missing_grad_outputs: list[str]  # the Function's zeros for an output autograd passes no gradient for
    # Lanes of one input that read the same positions (x and x.flip(-1)) store their gradients in buffers of their
    # own (a layer of disjoint lanes each), which the host adds to the input's gradient
    layer_buffers: list[str]  # their names, as kernel arguments after the input gradients
    layer_sums: list[str]  # the host's additions after the launch
    # Further row groups (math.lanes.groups: k beside q) walked by the same launch after the first group's tiles
    groups: GroupLaunch | None = None
    grouped: list[str] = ()  # their tensors (inputs and outputs)
    # An input that broadcasts (RoPE's cos) mostly takes no gradient: its per-element gradient, as large as the
    # first input, is only stored (and summed) where it requires one; a constexpr flag per such input
    store_flags: list[str] = ()
    store_flag_args: list[str] = ()
    # The shape each input that broadcasts is laid out against: the first input's, of shorter rows for an input of
    # rows shorter than the first input's (``... /2``)
    against: dict[str, str] = field(default_factory=dict)
    # the same in the backward wrapper: the upstream gradient's shape, or the first input's rows' width in lanes
    backward_against: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupLaunch:
    """The pieces of a kernel whose launch walks several row groups: each program past the first group's tiles
    swaps in the pointers, strides, row count and broadcast layouts of its group, then runs the first group's math."""

    forward_args: list[str]  # kernel parameters after the outputs: broadcast layouts, row counts, group starts
    backward_args: list[str]
    forward_swap: list[str]  # kernel lines right after the program id is read
    backward_swap: list[str]
    unspecialized_forward: list[str]  # swapped integers Triton must not specialize (a 1 would become a constant)
    unspecialized_backward: list[str]
    host_checks: list[str]  # forward wrapper, before the inputs become rows: each group's shape and layouts
    broadcast_layouts: bool  # the host checks and backward read broadcast layouts (layout_utils.broadcast_layout)
    forward_host: list[str]  # after the first group's outputs are allocated
    launch_merge: list[str]  # after the first group's tile_launch: one grid over all groups
    forward_launch_args: list[str]
    backward_shapes: list[str]  # backward wrapper, before the upstream gradients become rows
    backward_host: list[str]  # after the first group's gradient buffers
    backward_launch_args: list[str]


def lanes_held(profile: KernelProfile) -> dict[str, int]:
    """The lanes each input's row holds: ``math.lanes.count``, fewer for an input of shorter rows (``... /2``)."""
    return {t.name: profile.math.lanes.count // narrowing(t.broadcast) for t in profile.inputs}


def _row_columns(held: dict[str, int], count: int, name: str) -> str:
    """The host's expression of ``name``'s row length, from the first input's ``shape``."""
    return "shape[-1]" if held[name] == count else f"shape[-1] // {count // held[name]}"


def _layered_tensor(buffer: str) -> str:
    """The input a layer buffer (``grad_x_layer_1``) holds gradients of."""
    return buffer.removeprefix("grad_").rsplit("_layer_", 1)[0]


def _broadcast_rows(tensor: str) -> str:
    """The kernel line of the offsets of the rows a broadcast input holds for the tile's rows."""
    rows = "(row_start + tile_rows)"
    return (
        f"{tensor}_rows = ({rows} // {tensor}_period * {tensor}_inner + {rows} % {tensor}_inner) * {tensor}_row_stride"
    )


def _row_length(lanes: int) -> str:
    return "n_cols" if lanes == 1 else f"{lanes} * n_cols"


def _moved(lanes: int) -> str:
    return "n_cols" if lanes == 1 else f"({lanes} * n_cols)"


def _indexed(columns: str) -> str:
    return f"{columns}[None, :]" if columns == LANE_INDEX else f"({columns})[None, :]"


def _load(variable: str, pointer: str, stride: str, lane: LaneMap, broadcast: bool = False) -> str:
    columns = lane.columns(LANE_INDEX)
    if broadcast:  # read at its own row of each row of the tile (``_broadcast_rows``; its pointer stays put)
        return (
            f"{variable} = tl.load({pointer}_ptr + ({pointer}_rows + {_indexed(columns)}), mask=mask, "
            "other=0.0).to(tl.float32)"
        )
    return (
        f"{variable} = tl.load({pointer}_ptr + (tile_rows * {stride} + {_indexed(columns)}), mask=mask, "
        "other=0.0).to(tl.float32)"
    )


def _store(variable: str, pointer: str, stride: str, lane: LaneMap) -> str:
    columns = lane.columns(LANE_INDEX)
    return (
        f"tl.store({pointer}_ptr + (tile_rows * {stride} + {_indexed(columns)}), "
        f"{variable}.to({pointer}_ptr.dtype.element_ty), mask=mask)"
    )


def lane_ops(profile: KernelProfile, forward_reads: set[str], backward_reads: set[str]) -> LaneOpsView:
    lanes = profile.math.lanes
    count = lanes.count
    inputs = [t.name for t in profile.inputs]
    held = lanes_held(profile)
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    all_outputs, all_grad_inputs = [t.name for t in profile.outputs], grad_inputs
    outputs = all_outputs
    widths = lanes.output_widths()
    read = {name: parse_lane(text) for name, text in lanes.inputs.items()}
    stored = {name: parse_lane(text) for name, text in lanes.outputs.items()}
    first = inputs[0]
    broadcast = {t.name for t in profile.inputs if t.broadcast}
    grouped = {renamed for group in lanes.groups for renamed in group.values()}
    # Tensors of a further row group: their shapes (``shape_1``, the group's first input's) and first-group names.
    first_of = {renamed: name for group in lanes.groups for name, renamed in group.items()}
    shape_of = {renamed: f"shape_{index}" for index, group in enumerate(lanes.groups, 1) for renamed in group.values()}
    outputs = [name for name in outputs if name not in grouped]
    grad_inputs = [name for name in grad_inputs if name not in grouped]
    tensors = {t.name: t for t in profile.inputs if t.broadcast}
    forward_inputs = {lane.tensor for name, lane in read.items() if name in forward_reads} - broadcast
    forward_moves = [f"{name}_ptr += row_start * {name}_row_stride" for name in inputs if name in forward_inputs]
    forward_moves += [f"{name}_ptr += row_start * {_moved(widths[name])}" for name in outputs]
    grad_outputs_read = {lane.tensor for name, lane in stored.items() if f"grad_{name}" in backward_reads}
    inputs_read = {lane.tensor for name, lane in read.items() if name in backward_reads} - broadcast
    backward_moves = (
        [f"grad_{name}_ptr += row_start * grad_{name}_row_stride" for name in outputs if name in grad_outputs_read]
        + [f"{name}_ptr += row_start * {name}_row_stride" for name in inputs if name in inputs_read]
        + [f"grad_{name}_ptr += row_start * {_moved(held[name])}" for name in grad_inputs]
    )
    lane_index = f"{LANE_INDEX} = col_start + cols"
    # An output wider or narrower than the input (two lanes of a row cut into one): the input's own width.
    backward_input_shape = "shape" if widths[outputs[0]] == count else f"(*shape[:-1], {_row_length(count)})"
    forward_broadcast = [
        b for b in inputs if b in broadcast and any(n in forward_reads for n, lane in read.items() if lane.tensor == b)
    ]
    backward_broadcast = [
        b for b in inputs if b in broadcast and any(n in backward_reads for n, lane in read.items() if lane.tensor == b)
    ]
    covered = {name: covers_row([lane for lane in read.values() if lane.tensor == name], held[name]) for name in inputs}
    # The buffer each input lane's gradient goes to: the input's own for its first layer of disjoint lanes.
    buffer_of, layer_buffers = {}, []
    for name in grad_inputs:
        layers = disjoint_layers([lane for lane in read.values() if lane.tensor == name])
        for index, layer in enumerate(layers):
            buffer = f"grad_{name}" if index == 0 else f"grad_{name}_layer_{index}"
            layer_buffers += [buffer] if index else []
            buffer_of.update({lane: buffer for lane in layer})
        covered[name] = covers_row(layers[0], held[name]) if layers else False
    layered = [name for name in grad_inputs if f"grad_{name}_layer_1" in layer_buffers]
    return LaneOpsView(
        count=count,
        forward_loads=[
            _load(name, lane.tensor, f"{lane.tensor}_row_stride", lane, lane.tensor in broadcast)
            for name, lane in read.items()
            if name in forward_reads
        ],
        forward_stores=[
            _store(name, lane.tensor, _row_length(widths[lane.tensor]), lane) for name, lane in stored.items()
        ],
        forward_pointer_moves=[*forward_moves, *(_broadcast_rows(b) for b in forward_broadcast), lane_index],
        backward_loads=[
            _load(f"grad_{name}", f"grad_{lane.tensor}", f"grad_{lane.tensor}_row_stride", lane)
            for name, lane in stored.items()
            if f"grad_{name}" in backward_reads
        ]
        + [
            _load(name, lane.tensor, f"{lane.tensor}_row_stride", lane, lane.tensor in broadcast)
            for name, lane in read.items()
            if name in backward_reads
        ],
        backward_stores=[
            line
            for tensor in grad_inputs
            for line in _guarded(
                [
                    _store(f"grad_{name}", buffer_of[lane], _row_length(held[tensor]), lane)
                    for name, lane in read.items()
                    if lane.tensor == tensor
                ],
                _store_flag(tensor) if tensor in broadcast else "",
            )
        ],
        store_flags=[_store_flag(name) for name in grad_inputs if name in broadcast],
        store_flag_args=[f"store_grad_{name}" for name in grad_inputs if name in broadcast],
        backward_pointer_moves=[
            *backward_moves,
            *(f"{buffer}_ptr += row_start * {_moved(held[_layered_tensor(buffer)])}" for buffer in layer_buffers),
            *(_broadcast_rows(b) for b in backward_broadcast),
            lane_index,
        ],
        host_checks=[
            f"if shape[-1] % {count}:",
            f'    raise ValueError(f"{profile.operation_name}: {first} has {{shape[-1]}} columns, not a multiple of '
            f'the {count} lanes its row is cut into")',
            f"n_cols = shape[-1] // {count}  # the lane length",
            # an input that broadcasts is cut into the same lanes: it cannot hold one value per row
            *(
                line
                for name in inputs
                if name in broadcast
                for line in (
                    f"if {name}.shape[-1] != {_row_columns(held, count, name)}:",
                    f'    raise ValueError(f"{profile.operation_name}: {name} has shape {{tuple({name}.shape)}}: its '
                    f"rows are cut into lanes as {first}'s, which needs {{{_row_columns(held, count, name)}}} "
                    'columns")',
                )
            ),
        ],
        backward_lane_length=f"n_cols = shape[-1] // {widths[outputs[0]]}  # the lane length",
        output_allocations=[
            f"{name} = torch.empty((n_rows, {_row_length(widths[name])}), dtype={first}.dtype, device={first}.device)"
            for name in outputs
        ],
        grad_output_rows=[f"grad_{name} = as_rows(grad_{name}, {_row_length(widths[name])})" for name in outputs],
        # Positions of an input no lane (of a layer) reads take no gradient: such a buffer starts at zero.
        # An input that broadcasts takes its gradient per element of the first input, in fp32, summed after.
        # An input whose lanes meet (flip(x) beside x) takes its gradient in layers: fp32 buffers, summed and rounded
        # once, as two halves each rounded to bf16 lose the digits of a sum that nearly cancels them.
        gradient_buffers=[
            f"grad_{name} = torch.{'empty' if covered[name] else 'zeros'}((n_rows, {_row_length(held[name])}), "
            f"dtype={'torch.float32' if name in broadcast or name in layered else f'{name}.dtype'}, "
            f"device={name}.device)" + (f" if store_grad_{name} else {first}" if name in broadcast else "")
            for name in grad_inputs
        ]
        + [f"{buffer} = torch.zeros_like({buffer.rsplit('_layer_', 1)[0]})" for buffer in layer_buffers],
        layer_buffers=layer_buffers,
        layer_sums=[
            f"grad_{name} = grad_{name}"
            + "".join(
                f".add_({buffer})" for buffer in layer_buffers if buffer.rsplit("_layer_", 1)[0] == f"grad_{name}"
            )
            + ("" if name in broadcast else f".to({name}.dtype)")  # a broadcast input's is summed over rows after
            for name in layered
        ],
        outputs_viewed=[
            f"{name}.view(*{shape_of.get(name, 'shape')}[:-1], {_row_length(widths[first_of.get(name, name)])})"
            for name in all_outputs
        ],
        gradients_viewed=[
            f"grad_{name}.view(*{shape_of.get(name, 'shape')}[:-1], {_row_length(held[first_of.get(name, name)])})"
            # an input that broadcasts and takes no gradient has the first input in place of its buffer
            + (f" if store_grad_{name} else None" if name in broadcast else "")
            for name in all_grad_inputs
        ],
        against={name: narrowed_shape_expression(t.broadcast, f"{first}.shape") for name, t in tensors.items()},
        backward_against={
            name: backward_input_shape if held[name] == count else f"(*shape[:-1], {_row_length(held[name])})"
            for name in tensors
        },
        missing_grad_outputs=[
            f"grad_{name} = {first}.new_zeros((*{first}.shape[:-1], {first}.shape[-1] // {count} * {widths[name]}))"
            if name not in grouped
            else f"grad_{name} = torch.zeros(ctx.{name}_shape, dtype={first}.dtype, device={first}.device)"
            for name in all_outputs
        ],
        groups=_group_launch(profile, forward_reads, backward_reads, covered) if lanes.groups else None,
        grouped=sorted(grouped),
    )


def _store_flag(name: str) -> str:
    return f"STORE_GRAD_{name.upper()}"


def _guarded(lines: list[str], flag: str) -> list[str]:
    return [f"if {flag}:", *(f"    {line}" for line in lines)] if flag and lines else lines


def _group_launch(profile: KernelProfile, forward_reads: set[str], backward_reads: set[str], covered) -> GroupLaunch:
    lanes = profile.math.lanes
    count, widths = lanes.count, lanes.output_widths()
    held = lanes_held(profile)
    tensors = {t.name: t for t in profile.inputs}
    broadcast = [t.name for t in profile.inputs if t.broadcast]
    read = {name: parse_lane(text) for name, text in lanes.inputs.items()}
    stored = {name: parse_lane(text) for name, text in lanes.outputs.items()}
    first_inputs = [name for name in tensors if name in lanes.groups[0]]
    first_outputs = [t.name for t in profile.outputs if t.name in lanes.groups[0]]
    grad_outputs_read = [
        o for o in first_outputs if any(f"grad_{n}" in backward_reads for n, lane in stored.items() if lane.tensor == o)
    ]
    inputs_read = [m for m in first_inputs if any(n in backward_reads for n, lane in read.items() if lane.tensor == m)]
    broadcast_read = [b for b in broadcast if any(n in backward_reads for n, lane in read.items() if lane.tensor == b)]
    broadcast_grads = [b for b in broadcast if tensors[b].requires_grad]
    forward_args, backward_args, forward_swap, backward_swap = [], [], [], []
    checks, forward_host, merge, backward_shapes, backward_host = [], [], [], [], []
    forward_launch, backward_launch = [], []
    starts = []
    for index, group in enumerate(lanes.groups, start=1):
        main, shape = group[first_inputs[0]], f"shape_{index}"
        layouts = [f"{b}_inner_{index}, {b}_period_{index}" for b in broadcast]
        forward_args += [*(f"{b}_{part}_{index}" for b in broadcast for part in ("inner", "period")), f"n_rows_{index}"]
        backward_args += [
            *(f"{b}_{part}_{index}" for b in broadcast_read for part in ("inner", "period")),
            *(f"grad_{b}_{index}_ptr" for b in broadcast_grads),
            f"n_rows_{index}",
        ]
        forward_launch += [
            *(f"{b}_{part}_{index}" for b in broadcast for part in ("inner", "period")),
            f"n_rows_{index}",
        ]
        backward_launch += [
            *(f"{b}_{part}_{index}" for b in broadcast_read for part in ("inner", "period")),
            *(f"grad_{b}_{index}" for b in broadcast_grads),
            f"n_rows_{index}",
        ]
        indent = "    " * (index - 1)
        pairs = [(f"{m}_ptr", f"{group[m]}_ptr") for m in first_inputs] + [
            (f"{m}_row_stride", f"{group[m]}_row_stride") for m in first_inputs
        ]
        pairs += [(f"{o}_ptr", f"{group[o]}_ptr") for o in first_outputs]
        pairs += [(f"{b}_{part}", f"{b}_{part}_{index}") for b in broadcast for part in ("inner", "period")]
        forward_swap += _swap(indent, index, group, pairs)
        pairs = [
            (f"grad_{o}_{part}", f"grad_{group[o]}_{part}") for o in grad_outputs_read for part in ("ptr", "row_stride")
        ]
        pairs += [(f"{m}_{part}", f"{group[m]}_{part}") for m in inputs_read for part in ("ptr", "row_stride")]
        pairs += [(f"grad_{m}_ptr", f"grad_{group[m]}_ptr") for m in first_inputs if tensors[m].requires_grad]
        pairs += [(f"grad_{b}_ptr", f"grad_{b}_{index}_ptr") for b in broadcast_grads]
        pairs += [(f"{b}_{part}", f"{b}_{part}_{index}") for b in broadcast_read for part in ("inner", "period")]
        backward_swap += _swap(indent, index, group, pairs)
        checks += [f"{shape} = {main}.shape"]
        for m in first_inputs:
            checks += [
                f"if {group[m]}.shape[-1] != shape[-1] or {group[m]}.dtype != {m}.dtype"
                f"{f' or {group[m]}.shape != {shape}' if group[m] != main else ''}:",
                f'    raise ValueError(f"{profile.operation_name}: {group[m]} has shape {{tuple({group[m]}.shape)}} '
                f'and dtype {{{group[m]}.dtype}}: one launch with {m} needs rows of {{shape[-1]}} in {{{m}.dtype}}")',
            ]
        checks += [
            f'{layout} = broadcast_layout("{profile.operation_name}", "{b}", tuple({b}.shape), "{main}", '
            f"tuple({narrowed_shape_expression(tensors[b].broadcast, shape)}){_inserted(tensors[b])})[2:]"
            for b, layout in zip(broadcast, layouts)
        ]
        forward_host += [f"n_rows_{index} = {main}.shape[0]"] + [
            f"{group[o]} = torch.empty((n_rows_{index}, {_row_length(widths[o])}), dtype={main}.dtype, "
            f"device={main}.device)"
            for o in first_outputs
        ]
        merge += [f"grid_{index}, tile_{index} = tile_launch(n_rows_{index}, view_cols, block_rows, block_cols, 1)"]
        starts.append(f"grid{'' if index == 1 else f'_{index - 1}'}[0]")
        first_grad = f"grad_{group[first_outputs[0]]}"
        backward_shapes += [f"{shape} = {first_grad}.shape"] + [
            f"grad_{group[o]} = as_rows(grad_{group[o]}, {_row_length(widths[o])})" for o in first_outputs
        ]
        backward_host += [f"n_rows_{index} = {first_grad}.shape[0]"]
        backward_host += [
            f"grad_{group[m]} = torch.{'empty' if covered[m] else 'zeros'}((n_rows_{index}, {_row_length(count)}), "
            f"dtype={group[m]}.dtype, device={group[m]}.device)"
            for m in first_inputs
            if tensors[m].requires_grad
        ]
        backward_host += [
            f"grad_{b}_{index} = torch.{'empty' if covered[b] else 'zeros'}((n_rows_{index}, {_row_length(held[b])}), "
            "dtype=torch.float32, "
            f"device={b}.device) if store_grad_{b} else {main}"
            for b in broadcast_grads
        ]
        backward_host += [
            f'{b}_inner_{index}, {b}_period_{index} = broadcast_layout("{profile.operation_name}", "{b}", '
            f'tuple({b}.shape), "{main}", tuple({narrowed_shape_expression(tensors[b].broadcast, shape)})'
            f"{_inserted(tensors[b])})[2:]"
            for b in broadcast_read
        ]
    groups = range(1, len(lanes.groups) + 1)
    merge += [
        f"{', '.join(f'group_start_{i}' for i in groups)} = {', '.join(starts)}",
        f"grid = (grid[0]{''.join(f' + grid_{i}[0]' for i in groups)},)",
        "# Each program tells its group from its id: the row tiles are walked whatever the row counts.",
        'tile.update(WALK_ROWS=True, WHOLE_TILES=tile["WHOLE_TILES"]'
        + "".join(f' and tile_{i}["WHOLE_TILES"]' for i in groups)
        + ")",
    ]
    starts_args = [f"group_start_{i}" for i in groups]
    swapped_forward = [name for name in forward_args if not name.endswith("_ptr")]
    swapped_backward = [name for name in backward_args if not name.endswith("_ptr")]
    strides = [f"{name}_row_stride" for m in first_inputs for name in (m, *(g[m] for g in lanes.groups))]
    return GroupLaunch(
        forward_args=forward_args + starts_args,
        backward_args=backward_args + starts_args,
        forward_swap=forward_swap,
        backward_swap=backward_swap,
        unspecialized_forward=["n_rows", *strides, *_layout_names(broadcast), *swapped_forward],
        unspecialized_backward=["n_rows", *strides, *_layout_names(broadcast_read), *swapped_backward],
        host_checks=checks,
        broadcast_layouts=bool(broadcast),
        forward_host=forward_host,
        launch_merge=merge,
        forward_launch_args=forward_launch + starts_args,
        backward_shapes=backward_shapes,
        backward_host=backward_host,
        backward_launch_args=backward_launch + starts_args,
    )


def _layout_names(broadcast: list[str]) -> list[str]:
    return [f"{b}_{part}" for b in broadcast for part in ("inner", "period")]


def _swap(indent: str, index: int, group: dict[str, str], pairs: list[tuple[str, str]]) -> list[str]:
    """Kernel lines: a program past the tiles of the groups before ``index`` takes that group's tensors."""
    named = ", ".join(dict.fromkeys(group.values()))
    lines = [
        f"{indent}if program >= group_start_{index}:  # past the tiles before it: the rows of {named}",
        f"{indent}    program -= group_start_{index}",
        f"{indent}    n_rows = n_rows_{index}",
    ]
    for start in range(0, len(pairs), 3):  # a few to a line
        chunk = pairs[start : start + 3]
        lines.append(f"{indent}    {', '.join(a for a, _ in chunk)} = {', '.join(b for _, b in chunk)}")
    return lines


def _inserted(tensor) -> str:
    """The dims the reference inserts into a broadcast input, as the host helpers take them."""
    from tools.kernelgen.broadcast import inserted_dims
    from tools.kernelgen.broadcast import own_rank

    if tensor.unsqueeze:
        return f", ({tensor.unsqueeze},)"
    inserted = inserted_dims(tensor.broadcast)
    return f", {inserted!r}, {own_rank(tensor.broadcast)}" if inserted else ""


__all__ = ["LaneOpsView", "lane_ops"]
