"""The lines by which a tier-1 or tier-2 autograd Function unwraps DTensor arguments to local shards and wraps its results
back (issue 21); the helpers they call are the target's ``liger_kernel/ops/layout_utils.py`` (shared_module.py)."""

from dataclasses import dataclass

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
    local = f"{_unpack(inputs + params)} = ctx.layout.local({_tuple(inputs)}, {_tuple(params)})"
    broadcast = [t.name for t in profile.inputs if t.broadcast]
    if broadcast:
        # A broadcast input's shards would not line up with the first input's rows: refused before any work.
        local = (
            f'raise ValueError("{profile.operation_name}: {broadcast[0]} broadcasts against {inputs[0]}, which '
            f'DTensor inputs cannot do here: pass local tensors (DTensor.to_local())")'
        )
    return DTensorView(
        layout=f'"{profile.operation_name}", {_by_name(inputs)}, {_by_name(params)}, {_tuple(quoted)}{reduces_rows}',
        types="{" + ", ".join(f"type({name})" for name in inputs + params) + "}",
        local=local,
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
