"""The lines by which a tier-1 or tier-2 autograd Function unwraps DTensor arguments to local shards and wraps its results
back (issue 21); the helpers they call are the target's ``liger_kernel/ops/dtensor_utils.py`` (shared_module.py). A
kernel whose shards would not compute its math takes no DTensors: its Function refuses them in one line instead, and
carries no layout code."""

import re

from dataclasses import dataclass

from tools.kernelgen.profile import COLUMN_INDEX
from tools.kernelgen.profile import KernelProfile


@dataclass(frozen=True)
class DTensorView:
    """The autograd Function's DTensor lines (ops_tier1.py.j2, ops_tier2.py.j2): each one unwraps or wraps."""

    layout: str  # the arguments of dtensor_layout
    types: str  # a set literal of the inputs' and parameters' types (plain ones skip dtensor_layout)
    local: str  # forward: inputs and parameters become local shards
    wrap: list[str]  # forward: outputs become DTensors (per-row outputs of a row reduction by wrap_rows)
    local_grads: list[str]  # backward: upstream gradients become local shards (of per-row outputs by local_row_grads)
    wrap_grads: str  # backward: gradients become DTensors


@dataclass(frozen=True)
class DTensorRefusal:
    """The autograd Function's first check of a kernel that takes no DTensors: any argument that is no plain tensor
    is refused in one line (a TypeError) naming the kernel and why."""

    types: str  # a set literal of the inputs' and parameters' types
    message: str


def dtensor_refusal(profile: KernelProfile) -> DTensorRefusal | None:
    """None where the kernel computes on DTensors' local shards; else why it cannot. Lanes (an index map) read
    positions across the row, groups of channels span several dims, and an input that broadcasts against the first
    is sharded unlike the first input's rows, and a row's first maximal column is the whole row's: a shard of any
    would not hold what the kernel reads together."""
    inputs = [t.name for t in profile.inputs]
    broadcast = [t.name for t in profile.inputs if t.broadcast]
    if profile.math.lanes is not None:
        why = "its index map reads across the row"
    elif profile.math.groups:
        why = f"its rows are groups of {inputs[0]}'s channels, which a shard would cut"
    elif broadcast:
        why = f"{broadcast[0]} broadcasts against {inputs[0]}, whose shards it would not line up with"
    elif any(re.search(rf"\b{COLUMN_INDEX}\b", s.of) for s in profile.math.statistics if profile.tier == 2):
        # x.max(dim).values: the first column holding the maximum, which a shard's own column numbers cannot tell
        why = "its gradient goes to the first column holding a row's maximum or minimum, which a shard cannot tell"
    else:
        return None
    return DTensorRefusal(
        types=_types(inputs + [prm.name for prm in profile.parameters]),
        message=f"{profile.operation_name}: DTensor inputs are not supported: {why}",
    )


def _types(names: list[str]) -> str:
    return "{" + ", ".join(f"type({name})" for name in names) + "}"


def _tuple(names: list[str]) -> str:
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _unpack(names: list[str]) -> str:
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _by_name(names: list[str]) -> str:
    """A dict literal of the variables ``names``, keyed by their names (for error messages that name them)."""
    return "{" + ", ".join(f'"{name}": {name}' for name in names) + "}"


def dtensor_view(
    profile: KernelProfile, grad_inputs: list[str], grad_outputs: list[str], row_outputs: tuple[str, ...] = ()
) -> DTensorView:
    inputs = [t.name for t in profile.inputs]
    outputs = [t.name for t in profile.outputs if t.name not in row_outputs]
    params = [prm.name for prm in profile.parameters]
    channel = [prm.name for prm in profile.parameters if prm.shape == "channel"]
    grads = [f"grad_{name}" for name in grad_inputs]
    row_grads = [f"grad_{name}" for name in row_outputs]
    element_grads = [name for name in grad_outputs if name not in row_grads]
    grad_params = [f"grad_{name}" for name in params]
    quoted = [f'"{name}"' for name in channel]
    # Row reductions all-reduce their per-row values where the columns are split (the split path).
    reduces_rows = ", reduces_rows=True" if profile.tier == 2 else ""
    return DTensorView(
        layout=f'"{profile.operation_name}", {_by_name(inputs)}, {_by_name(params)}, {_tuple(quoted)}{reduces_rows}',
        types=_types(inputs + params),
        local=f"{_unpack(inputs + params)} = ctx.layout.local({_tuple(inputs)}, {_tuple(params)})",
        wrap=[
            f"{_unpack(names)} = ctx.layout.{method}({', '.join(names)})"
            for method, names in (("wrap", outputs), ("wrap_rows", list(row_outputs)))
            if names
        ],
        local_grads=[
            f"{_unpack(names)} = ctx.layout.{method}({', '.join(names)})"
            for method, names in (("local_grads", element_grads), ("local_row_grads", row_grads))
            if names
        ],
        wrap_grads=f"{_unpack(grads + grad_params)} = ctx.layout.wrap_grads({_tuple(grads)}, {_tuple(grad_params)})",
    )
