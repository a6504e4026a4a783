"""The lines of a tier-1 ops file that depend on the profile's parameters and inputs, decided here so the template
only lays them out: each list is statements at one indentation level, nested lines carrying their own extra
indentation (an optional parameter's ``if HAS_...:`` block)."""

from __future__ import annotations

from tools.kernelgen.profile import LearnableParameter


def _flag(name: str) -> str:
    return f"HAS_{name.upper()}"


def _guarded(prm: LearnableParameter, optional: dict[str, str], lines: list[str]) -> list[str]:
    """``lines``, under ``if HAS_<NAME>:`` when the parameter is optional (its flag is a constexpr of the kernel)."""
    if prm.name not in optional:
        return lines
    return [f"if {_flag(prm.name)}:", *(f"    {line}" for line in lines)]


def param_loads(params: list[LearnableParameter], optional: dict[str, str]) -> list[str]:
    """Each parameter loaded as fp32, per channel as a row broadcast over the tile's rows; an absent optional one is
    its initial value."""
    lines = []
    for prm in params:
        if prm.shape == "channel":
            load = f"{prm.name} = tl.load({prm.name}_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]"
        else:
            load = f"{prm.name} = tl.load({prm.name}_ptr).to(tl.float32)"
        lines += _guarded(prm, optional, [load])
        if prm.name in optional:
            lines += ["else:", f"    {prm.name} = {optional[prm.name]}"]
    return lines


def pointer_moves(
    strided: list[str], contiguous: list[str], rows: str, columns: str = "", channel: list[str] = ()
) -> list[str]:
    """Each pointer moved ``rows`` rows on: strided tensors by their own row stride, contiguous ones by n_cols; with
    ``columns``, also that many columns on, per-channel parameters (``channel``) included."""
    on = f" + {columns}" if columns else ""
    return (
        [f"{name}_ptr += {rows} * {name}_row_stride{on}" for name in strided]
        + [f"{name}_ptr += {rows} * n_cols{on}" for name in contiguous]
        + [f"{name}_ptr += {columns}" for name in channel if columns]
    )


def contiguous_params(
    params: list[LearnableParameter], optional: dict[str, str], flat_scalars: bool = False
) -> list[str]:
    """Parameters are read as contiguous vectors (an absent optional one stays None); ``flat_scalars``: scalar ones
    as one-element vectors too (TileLang checks every buffer's shape)."""
    lines = []
    for prm in params:
        flat = ".reshape(1)" if flat_scalars and prm.shape == "scalar" else ""
        line = f"{prm.name} = {prm.name}{flat}.contiguous()"
        lines += [f"if {prm.name} is not None:", f"    {line}"] if prm.name in optional else [line]
    return lines


def flag_args(optional: dict[str, str]) -> list[str]:
    return [f"{_flag(name)}={name} is not None," for name in optional]


def accumulator_inits(params: list[LearnableParameter], optional: dict[str, str]) -> list[str]:
    return [
        line
        for prm in params
        for line in _guarded(
            prm, optional, [f"grad_{prm.name}_acc = tl.zeros((BLOCK_ROWS, BLOCK_COLS), dtype=tl.float32)"]
        )
    ]


def accumulations(params: list[LearnableParameter], optional: dict[str, str]) -> list[str]:
    return [
        line
        for prm in params
        for line in _guarded(prm, optional, [f"grad_{prm.name}_acc += tl.where(mask, grad_{prm.name}, 0.0)"])
    ]


def partial_stores(params: list[LearnableParameter], optional: dict[str, str]) -> list[str]:
    store = "tl.store(grad_{0}_partial_ptr + row_program * n_cols + cols, tl.sum(grad_{0}_acc, axis=0), mask=col_mask)"
    return [line for prm in params for line in _guarded(prm, optional, [store.format(prm.name)])]


def partial_buffers(params: list[LearnableParameter], optional: dict[str, str], device_of: str) -> list[str]:
    """The per-program fp32 partial sums of each parameter's gradient (None for an absent optional parameter)."""
    lines = []
    for prm in params:
        buffer = f"torch.empty((n_row_programs, n_cols), dtype=torch.float32, device={device_of}.device)"
        if prm.name in optional:
            lines += [
                f"grad_{prm.name}_partial = None",
                f"if {prm.name} is not None:",
                f"    grad_{prm.name}_partial = {buffer}",
            ]
        else:
            lines.append(f"grad_{prm.name}_partial = {buffer}")
    return lines


def gradient_buffers(grad_inputs: list[str], in_place: bool) -> list[str]:
    """Each input gradient's buffer: the input's own when gradients go in place and it is contiguous, else new."""
    lines = []
    for name in grad_inputs:
        new = f"torch.empty((n_rows, n_cols), dtype={name}.dtype, device={name}.device)"
        if in_place:
            lines += [f"if {name}.is_contiguous():", f"    grad_{name} = {name}", "else:", f"    grad_{name} = {new}"]
        else:
            lines.append(f"grad_{name} = {new}")
    return lines


__all__ = [
    "accumulations",
    "accumulator_inits",
    "contiguous_params",
    "flag_args",
    "gradient_buffers",
    "param_loads",
    "partial_buffers",
    "partial_stores",
    "pointer_moves",
]
