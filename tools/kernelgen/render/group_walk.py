"""Tier 2 over groups of channels (GroupNorm; ``math.groups``), drawn for _tier2_groups.j2: one program per group of a
sample, walking it as ``[BLOCK_CHANNELS, BLOCK_COLS]`` tiles (channels of the group by elements of a channel) in the
passes the split path already cuts the row math into (synth/rows.py RowPass): each reduction pass walks the group
and combines its tiles' parts of the statistics (as the ranks' parts are combined); the last pass walks it again to
write the outputs (forward) or the input gradients and each channel's sums of a per-channel input's gradient
(backward). A per-channel input is read once per channel block as a ``[BLOCK_CHANNELS, 1]`` vector. The registers a
thread holds are the tile's, whatever the group's length."""

from __future__ import annotations

import re

from dataclasses import dataclass

# How a reduction pass combines its tiles' parts of a statistic (a mean's part is already divided by n_cols): the
# running value's start and the statement that adds a tile's part, ``{name}`` the statistic.
_START = {
    "sum": "tl.zeros((1, 1), dtype=tl.float32)",
    "max": 'tl.full((1, 1), float("-inf"), tl.float32)',
    "min": 'tl.full((1, 1), float("inf"), tl.float32)',
}
_COMBINE = {
    "sum": "{name}_total += tl.sum({name}, axis=0, keep_dims=True)",
    "max": "{name}_total = tl.maximum({name}_total, tl.max({name}, axis=0, keep_dims=True))",
    "min": "{name}_total = tl.minimum({name}_total, tl.min({name}, axis=0, keep_dims=True))",
}
_REDUCTION = re.compile(r"^(\w+) = tl\.(sum|max|min)\(")


@dataclass(frozen=True)
class GroupPass:
    """One walk over a program's group: the row-level statements before it (they read no element), the tensors it
    loads per element and per channel, its per-element statements, the statistics it reduces (``(name, start,
    combine)``), and (the last pass) what it writes per element and sums per channel."""

    row_lines: list[str]
    element_loads: list[str]
    channel_loads: list[str]
    lines: list[str]
    reductions: list[tuple[str, str, str]]
    fills: dict[str, str]
    element_stores: list[str]  # grad_{name} (backward) or an output (forward), per element
    channel_sums: list[str]  # inputs whose gradient is summed per channel of the group (backward)


@dataclass(frozen=True)
class GroupKernelView:
    """A grouped kernel: its parameters and launch arguments (in the same order), the per-row values it loads first
    and stores last, its passes, the hyper-parameters it reads."""

    name: str
    parameters: list[str]
    arguments: list[str]
    row_loads: list[str]
    row_stores: list[str]  # fp32 statistics
    row_output_stores: list[str]  # outputs of one value per row, in the output's dtype
    passes: list[GroupPass]
    hypers: set[str]
    dtype_source: str


def _reads(statement: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", statement) is not None


def _group_pass(
    lines, loadable, channel, reductions, fills, element_stores=(), channel_sums=(), skipped=()
) -> GroupPass:
    """The pass of ``lines`` (those assigning ``skipped`` left out: the reductions earlier passes computed):
    statements that read no element (nor one computed from an element, nor the mask) hoisted before the walk, the
    ``loadable`` tensors they read loaded per element, or per channel for those in ``channel``."""
    kept = [line for line in lines if line.split(" = ")[0] not in skipped]
    read = [name for name in loadable if any(_reads(line, name) for line in kept)]
    per_element = set(read) | {"mask", "cols", "offsets"}
    row_lines, walked = [], []
    for line in kept:
        target = line.split(" = ")[0]
        if any(_reads(line, name) for name in per_element):
            per_element.add(target)
            walked.append(line)
        else:
            row_lines.append(line)
    return GroupPass(
        row_lines=row_lines,
        element_loads=[name for name in read if name not in channel],
        channel_loads=[name for name in read if name in channel],
        lines=walked,
        reductions=[(name, _START[op], _COMBINE[op].format(name=name)) for name, op in reductions],
        fills=dict(fills),
        element_stores=list(element_stores),
        channel_sums=list(channel_sums),
    )


def _tensor(name: str, channel: set[str]) -> tuple[list[str], list[str]]:
    """A tensor's kernel parameters and launch arguments: its pointer and row stride, and a per-channel input's
    layout (``channel_rows``)."""
    if name in channel:
        names = [f"{name}_ptr", f"{name}_row_stride", f"{name}_inner", f"{name}_period"]
        return names, [name, f"{name}_row_stride", f"{name}_inner", f"{name}_period"]
    return [f"{name}_ptr", f"{name}_row_stride"], [name, f"{name}.stride(0)"]


def group_kernels(ops, broadcast: set[str], hypers: list[str]) -> tuple[GroupKernelView, GroupKernelView]:
    """The forward and backward kernels of a grouped row program from its fused kernels and split passes
    (``ops``: views.RowProgramOpsView's fields so far), ``broadcast`` its per-channel inputs."""
    forward, backward, split = ops["forward_kernel"], ops["backward_kernel"], ops["split"]

    def reductions(split_pass):
        return [(name, op) for op, _, names in split_pass.groups for name in names]

    def passes(split_passes, loadable):
        return [_group_pass(p.kernel.lines, loadable, broadcast, reductions(p), p.kernel.fills) for p in split_passes]

    def reduced(lines):
        return [m.group(1) for line in lines if (m := _REDUCTION.match(line))]

    forward_loadable = list(forward.element_args)
    forward_passes = passes(split.forward_passes, forward_loadable) + [
        _group_pass(
            forward.lines,
            forward_loadable,
            broadcast,
            [],
            forward.fills,
            element_stores=forward.element_stores,
            skipped=reduced(forward.lines),
        )
    ]
    per_element_grads = [name for name in backward.element_stores if name not in broadcast]
    summed = [name for name in backward.element_stores if name in broadcast]
    backward_loadable = list(backward.element_args) + list(backward.input_args)
    backward_passes = passes(split.backward_passes, backward_loadable) + [
        _group_pass(
            backward.lines,
            backward_loadable,
            broadcast,
            [],
            backward.fills,
            element_stores=[f"grad_{name}" for name in per_element_grads],
            channel_sums=summed,
            skipped=reduced(backward.lines),
        )
    ]

    def kernel(view, tensors, row_loads, stores, row_pointers, pass_list) -> GroupKernelView:
        parameters, arguments = [], []
        for name in tensors:
            p, a = _tensor(name, broadcast)
            parameters += p
            arguments += a
        parameters += [f"{name}_ptr" for name in row_loads]
        arguments += list(row_loads)
        for name, per_channel in stores:
            parameters += [f"{name}_ptr"] if per_channel else [f"{name}_ptr", f"{name}_row_stride"]
            arguments += [name] if per_channel else [name, f"{name}.stride(0)"]
        parameters += [f"{name}_ptr" for name in row_pointers]
        arguments += list(row_pointers)
        statements = [line for p in pass_list for line in p.row_lines + p.lines + list(p.fills.values())]
        read = {name for name in hypers if any(_reads(line, name) for line in statements)}
        return GroupKernelView(
            name=view.name,
            parameters=parameters,
            arguments=arguments,
            row_loads=list(row_loads),
            row_stores=list(view.row_stores),
            row_output_stores=list(view.row_output_stores),
            passes=pass_list,
            hypers=read,
            dtype_source=view.dtype_source,
        )

    forward_view = kernel(
        forward,
        forward.element_args,
        [],
        [(name, False) for name in forward.element_stores],
        list(forward.row_output_stores) + list(forward.row_stores),
        forward_passes,
    )
    backward_view = kernel(
        backward,
        list(backward.element_args) + list(backward.input_args),
        list(backward.row_grad_args) + list(backward.row_loads),
        [(f"grad_{name}", name in broadcast) for name in backward.element_stores],
        [],
        backward_passes,
    )
    return forward_view, backward_view
