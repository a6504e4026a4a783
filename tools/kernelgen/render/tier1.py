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
    """The backward program's partial sums: a row of them (one per column) for a per-channel parameter, one value
    for a scalar one (at row_program, column block: the buffers of ``partial_buffers``)."""
    channel = (
        "tl.store(grad_{0}_partial_ptr + row_program * n_cols + cols, tl.sum(grad_{0}_acc, axis=0), mask=col_mask)"
    )
    scalar = (
        "tl.store(grad_{0}_partial_ptr + row_program * tl.num_programs(1) + tl.program_id(1), tl.sum(grad_{0}_acc))"
    )
    return [
        line
        for prm in params
        for line in _guarded(prm, optional, [(channel if prm.shape == "channel" else scalar).format(prm.name)])
    ]


def _per_parameter(params: list[LearnableParameter], optional: dict[str, str], variable: str, value: str) -> list[str]:
    """``<variable> = <value>`` for each parameter (both formatted with its name); None for an absent optional one."""
    lines = []
    for prm in params:
        target, made = variable.format(prm.name), value.format(prm.name)
        if prm.name in optional:
            lines += [f"{target} = None", f"if {prm.name} is not None:", f"    {target} = {made}"]
        else:
            lines.append(f"{target} = {made}")
    return lines


def partial_buffers(params: list[LearnableParameter], optional: dict[str, str], device_of: str) -> list[str]:
    """The per-program fp32 partial sums of each parameter's gradient (None for an absent optional parameter): a row
    per program for a per-channel parameter, a value per program for a scalar one."""
    lines = []
    for prm in params:
        shape = "(n_row_programs, n_cols)" if prm.shape == "channel" else "(n_row_programs, n_col_blocks)"
        buffer = f"torch.empty({shape}, dtype=torch.float32, device={device_of}.device)"
        lines += _per_parameter([prm], optional, "grad_{0}_partial", buffer)
    return lines


def parameter_gradients(params: list[LearnableParameter], optional: dict[str, str]) -> list[str]:
    """Each parameter's gradient: the backward programs' fp32 partial sums added up and cast to the parameter's dtype,
    as upstream's kernels add theirs (None for an absent optional parameter)."""
    lines = []
    for prm in params:
        total = "sum(0)" if prm.shape == "channel" else "sum()"
        made = f"grad_{{0}}_partial.{total}.to({{0}}.dtype).view_as({{0}})"
        lines += _per_parameter([prm], optional, "grad_{0}", made)
    return lines


def row_block_settings(
    max_block_cols: int, num_warps: int | None, backward_num_warps: int | None, trig_backward: bool
) -> tuple[list[str], list[str]]:
    """The lines that pick each pass's ``block_size`` and ``num_warps`` in a launch by row blocks
    (ops_tier1_rows.py.j2), from ``cols``: the profile's warps where it sets them, else 4 (8 from 4096-element blocks)
    forward and twice those backward, which loads a tensor more; a backward calling sin or cos (``trig_backward``,
    which the profile's warps turn off) takes 4096-element blocks at 16 warps, as the 2-D tiles' backward does."""
    block = f"block_size = min(next_power_of_2(cols), {max_block_cols})"

    def by_block(small: int, wide: int) -> str:
        # Blocks of 4096 elements take the wider warps; a cap below that never reaches them (no dead branch).
        return (
            f"num_warps = {wide} if block_size >= 4096 else {small}"
            if max_block_cols >= 4096
            else f"num_warps = {small}"
        )

    forward = [block, f"num_warps = {num_warps}  # the profile's tiling.num_warps" if num_warps else by_block(4, 8)]
    if trig_backward:
        backward = [
            "# sin and cos with their range reduction take 120-160 registers a thread at 8 warps; at 16 the compiler",
            "# keeps them under 128, and the warps hide the math's latency.",
            "block_size = min(next_power_of_2(cols), 4096)",
            "num_warps = 16",
        ]
    elif backward_num_warps:
        backward = [block, f"num_warps = {backward_num_warps}  # the profile's tiling.backward_num_warps"]
    elif num_warps:
        backward = [block, f"num_warps = {num_warps}  # the profile's tiling.num_warps"]
    else:
        backward = [
            block,
            "# Twice the forward's warps: the backward loads a tensor more and does more math per element.",
            by_block(8, 16),
        ]
    return forward, backward


def row_gradient_buffers(grad_inputs: list[str], in_place: bool) -> list[str]:
    """The input gradients' buffers of a kernel launched by row blocks (ops_tier1_rows.py.j2): in place, the input's
    own where it is contiguous, except under torch.compile, which plans the graph's buffers (a graph that writes its
    inputs is not captured as a CUDA graph); else new."""
    lines = (
        [
            "# Where they are contiguous, and not under torch.compile: it plans the graph's buffers itself (a graph",
            "# that writes its inputs is not captured as a CUDA graph).",
            "in_place = not torch.compiler.is_compiling()",
        ]
        if in_place
        else []
    )
    for name in grad_inputs:
        new = f"torch.empty((n_rows, n_cols), dtype={name}.dtype, device={name}.device)"
        lines.append(
            f"grad_{name} = {name} if in_place and {name}.is_contiguous() else {new}"
            if in_place
            else f"grad_{name} = {new}"
        )
    return lines


def gradient_buffers(grad_inputs: list[str], in_place: bool, broadcast: set[str] = frozenset()) -> list[str]:
    """Each input gradient's buffer: the input's own when gradients go in place (``own_buffer``: where it is
    contiguous and not under torch.compile), else new; an
    input that broadcasts against the first gets one per element of the first, in fp32, summed to its shape after."""
    lines = []
    for name in grad_inputs:
        new = f"torch.empty((n_rows, n_cols), dtype={name}.dtype, device={name}.device)"
        if name in broadcast:
            lines.append(f"grad_{name} = torch.empty((n_rows, n_cols), dtype=torch.float32, device={name}.device)")
        elif in_place:
            lines.append(f"grad_{name} = own_buffer({name}, n_rows, n_cols)")
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
    "parameter_gradients",
    "partial_buffers",
    "partial_stores",
    "pointer_moves",
    "row_block_settings",
    "row_gradient_buffers",
]
