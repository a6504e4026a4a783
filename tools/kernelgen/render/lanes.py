"""The lines of a tier-1 ops file whose profile has lanes (``math.lanes``: an index map within the row): the kernels
run over the lane index ``lane`` (``n_cols`` is the lane length), load each input lane and store each output lane at
the positions its map gives, and the backward stores each input lane's gradient where the lane was read."""

from __future__ import annotations

from dataclasses import dataclass

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


def _row_length(lanes: int) -> str:
    return "n_cols" if lanes == 1 else f"{lanes} * n_cols"


def _moved(lanes: int) -> str:
    return "n_cols" if lanes == 1 else f"({lanes} * n_cols)"


def _indexed(columns: str) -> str:
    return f"{columns}[None, :]" if columns == LANE_INDEX else f"({columns})[None, :]"


def _load(variable: str, pointer: str, stride: str, lane: LaneMap) -> str:
    columns = lane.columns(LANE_INDEX)
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
    grad_inputs = [t.name for t in profile.inputs if t.requires_grad]
    outputs = [t.name for t in profile.outputs]
    widths = lanes.output_widths()
    read = {name: parse_lane(text) for name, text in lanes.inputs.items()}
    stored = {name: parse_lane(text) for name, text in lanes.outputs.items()}
    first = inputs[0]
    forward_inputs = {lane.tensor for name, lane in read.items() if name in forward_reads}
    forward_moves = [f"{name}_ptr += row_start * {name}_row_stride" for name in inputs if name in forward_inputs]
    forward_moves += [f"{name}_ptr += row_start * {_moved(widths[name])}" for name in outputs]
    grad_outputs_read = {lane.tensor for name, lane in stored.items() if f"grad_{name}" in backward_reads}
    inputs_read = {lane.tensor for name, lane in read.items() if name in backward_reads}
    backward_moves = (
        [f"grad_{name}_ptr += row_start * grad_{name}_row_stride" for name in outputs if name in grad_outputs_read]
        + [f"{name}_ptr += row_start * {name}_row_stride" for name in inputs if name in inputs_read]
        + [f"grad_{name}_ptr += row_start * {_moved(count)}" for name in grad_inputs]
    )
    lane_index = f"{LANE_INDEX} = col_start + cols"
    covered = {name: covers_row([lane for lane in read.values() if lane.tensor == name], count) for name in inputs}
    # The buffer each input lane's gradient goes to: the input's own for its first layer of disjoint lanes.
    buffer_of, layer_buffers = {}, []
    for name in grad_inputs:
        layers = disjoint_layers([lane for lane in read.values() if lane.tensor == name])
        for index, layer in enumerate(layers):
            buffer = f"grad_{name}" if index == 0 else f"grad_{name}_layer_{index}"
            layer_buffers += [buffer] if index else []
            buffer_of.update({lane: buffer for lane in layer})
        covered[name] = covers_row(layers[0], count) if layers else False
    return LaneOpsView(
        count=count,
        forward_loads=[
            _load(name, lane.tensor, f"{lane.tensor}_row_stride", lane)
            for name, lane in read.items()
            if name in forward_reads
        ],
        forward_stores=[
            _store(name, lane.tensor, _row_length(widths[lane.tensor]), lane) for name, lane in stored.items()
        ],
        forward_pointer_moves=[*forward_moves, lane_index],
        backward_loads=[
            _load(f"grad_{name}", f"grad_{lane.tensor}", f"grad_{lane.tensor}_row_stride", lane)
            for name, lane in stored.items()
            if f"grad_{name}" in backward_reads
        ]
        + [
            _load(name, lane.tensor, f"{lane.tensor}_row_stride", lane)
            for name, lane in read.items()
            if name in backward_reads
        ],
        backward_stores=[
            _store(f"grad_{name}", buffer_of[lane], _row_length(count), lane)
            for name, lane in read.items()
            if lane.tensor in grad_inputs
        ],
        backward_pointer_moves=[
            *backward_moves,
            *(f"{buffer}_ptr += row_start * {_moved(count)}" for buffer in layer_buffers),
            lane_index,
        ],
        host_checks=[
            f"if shape[-1] % {count}:",
            f'    raise ValueError(f"{profile.operation_name}: {first} has {{shape[-1]}} columns, not a multiple of '
            f'the {count} lanes its row is cut into")',
            f"n_cols = shape[-1] // {count}  # the lane length",
        ],
        backward_lane_length=f"n_cols = shape[-1] // {widths[outputs[0]]}  # the lane length",
        output_allocations=[
            f"{name} = torch.empty((n_rows, {_row_length(widths[name])}), dtype={first}.dtype, device={first}.device)"
            for name in outputs
        ],
        grad_output_rows=[f"grad_{name} = as_rows(grad_{name}, {_row_length(widths[name])})" for name in outputs],
        # Positions of an input no lane (of a layer) reads take no gradient: such a buffer starts at zero.
        gradient_buffers=[
            f"grad_{name} = torch.{'empty' if covered[name] else 'zeros'}((n_rows, {_row_length(count)}), "
            f"dtype={name}.dtype, device={name}.device)"
            for name in grad_inputs
        ]
        + [f"{buffer} = torch.zeros_like({buffer.rsplit('_layer_', 1)[0]})" for buffer in layer_buffers],
        layer_buffers=layer_buffers,
        layer_sums=[f"{buffer.rsplit('_layer_', 1)[0]} += {buffer}" for buffer in layer_buffers],
        outputs_viewed=[f"{name}.view(*shape[:-1], {_row_length(widths[name])})" for name in outputs],
        gradients_viewed=[f"grad_{name}.view(*shape[:-1], {_row_length(count)})" for name in grad_inputs],
        missing_grad_outputs=[
            f"grad_{name} = {first}.new_zeros((*{first}.shape[:-1], {first}.shape[-1] // {count} * {widths[name]}))"
            for name in outputs
        ],
    )


__all__ = ["LaneOpsView", "lane_ops"]
