"""How element-wise and row kernels lay their tensors out for a launch: inputs as ``[rows, columns]``, inputs that
broadcast against the first read by row without expanding them (and their gradients summed back to their shapes), and
the tiles the programs take. DTensor arguments: ``dtensor_utils.py``."""

import functools
import importlib
import math
import os
import sys

import torch
import triton
import triton.language as tl


def as_rows(tensor: torch.Tensor, n_cols: int) -> torch.Tensor:
    """``tensor`` as ``[rows, n_cols]`` with unit column stride, for kernels that take a row stride: a view when its
    rows are evenly spaced (a slice of a wider row-major tensor, such as one half of a fused gate/up projection), a
    contiguous copy otherwise."""
    if tensor.stride(-1) != 1:
        tensor = tensor.contiguous()
    return tensor if tensor.dim() == 2 else tensor.reshape(-1, n_cols)


def launch_shape(n_rows: int, n_cols: int, *tensors: torch.Tensor) -> tuple[int, int]:
    """The ``[rows, columns]`` an element-wise kernel walks: one row of all the elements when every tensor's rows lie
    back to back, so that tiles run across row ends and consecutive programs cover consecutive memory (the flat walk
    torch.compile's pointwise kernels take), else the tensors' rows."""
    if n_rows > 1 and all(t.stride(0) == n_cols for t in tensors):
        return 1, n_rows * n_cols
    return n_rows, n_cols


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def tile_settings(
    n_rows: int, n_cols: int, block_elements: int, max_block_cols: int, num_warps: int | None = None
) -> tuple[int, int, int]:
    """An element-wise kernel's tile and warps: about ``block_elements`` elements per program, whole rows when rows
    are short, slices of ``max_block_cols`` or half that many columns of long rows (``max_block_cols``-element slices
    of a single row). ``num_warps``: fixed warps, else 16 elements a thread (fewer, wider loads a thread beat more
    warps)."""
    block_cols = min(_next_power_of_2(n_cols), max_block_cols)
    narrow = max_block_cols // 2
    # Of the two slice widths, the one that pads each row's last slice less.
    if n_rows > 1 and block_cols == max_block_cols and -(-n_cols // max_block_cols) * 2 > -(-n_cols // narrow):
        block_cols = narrow
    block_rows = max(1, min(block_elements // block_cols, _next_power_of_2(n_rows)))
    if num_warps is None:
        num_warps = 8 if block_rows * block_cols >= 4096 else 4
    return block_rows, block_cols, num_warps


def trig_tile_settings(n_rows: int, n_cols: int, block_elements: int) -> tuple[int, int, int]:
    """The tile of an element-wise backward that calls sin or cos: ``block_elements`` elements in slices of up to
    4096 columns, at 16 warps. Their range reduction needs many registers a thread; at 16 warps the compiler keeps
    them under 128, and the extra warps hide the math's latency."""
    block_cols = min(_next_power_of_2(n_cols), 4096)
    block_rows = max(1, min(block_elements // block_cols, _next_power_of_2(n_rows)))
    return block_rows, block_cols, 16


def tile_launch(n_rows: int, n_cols: int, block_rows: int, block_cols: int, num_warps: int) -> tuple[tuple, dict]:
    """The grid and the tile arguments of an element-wise kernel that walks ``n_rows`` x ``n_cols`` in tiles of
    ``block_rows`` x ``block_cols``, one program per tile: BLOCK_ROWS, BLOCK_COLS, WALK_ROWS (more than one row: each
    program splits its id into a row and a column block), WHOLE_TILES (the tiles divide the rows and the columns: no
    lane is masked) and num_warps."""
    grid = (-(-n_rows // block_rows) * -(-n_cols // block_cols),)
    whole = n_rows % block_rows == 0 and n_cols % block_cols == 0
    tile = {"BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols, "WALK_ROWS": n_rows > 1, "WHOLE_TILES": whole}
    return grid, {**tile, "num_warps": num_warps}


@triton.jit
def tile_of_program(
    program,
    n_rows,
    n_cols,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    WALK_ROWS: tl.constexpr,
    WHOLE_TILES: tl.constexpr,
):
    """The tile program ``program`` of a ``tile_launch`` grid takes: ``(row_start, col_start, tile_rows, cols,
    col_mask, mask)``, column blocks fastest, 64-bit starts and 32-bit offsets within the tile. The program id is
    split in 32 bits (64-bit division is emulated); whole tiles mask no lane, so their loads and stores compile
    unpredicated."""
    if WALK_ROWS:
        n_col_blocks = tl.cdiv(n_cols, BLOCK_COLS)
        row_start = (program // n_col_blocks).to(tl.int64) * BLOCK_ROWS
        col_start = (program % n_col_blocks).to(tl.int64) * BLOCK_COLS
    else:
        row_start = 0
        col_start = program.to(tl.int64) * BLOCK_COLS
    tile_rows = tl.arange(0, BLOCK_ROWS)[:, None]
    cols = tl.arange(0, BLOCK_COLS)
    if WHOLE_TILES:
        col_mask = tl.full((BLOCK_COLS,), True, tl.int1)
        mask = tl.full((BLOCK_ROWS, BLOCK_COLS), True, tl.int1)
    else:
        col_mask = col_start + cols < n_cols
        mask = (row_start + tile_rows < n_rows) & col_mask[None, :]
    return row_start, col_start, tile_rows, cols, col_mask, mask


# Columns a row kernel's program holds whole in its registers.
MAX_ROW_COLUMNS = 65536


def row_tile_settings(
    kernel: str,
    n_rows: int,
    n_cols: int,
    block_elements: int,
    backward: bool = False,
    rows_held: int | None = None,
    num_warps: int | None = None,
) -> tuple[int, int, int]:
    """A row kernel's tile of whole rows, as many as fill about ``block_elements`` elements (at least one), and its
    warps: ``num_warps`` if fixed, else more with the tile, from 8192 elements on in the backward, which does more
    per element. ``rows_held``: the full tiles a backward summing parameter gradients keeps live per thread (its
    accumulators and the rows it loads); where two of its programs of 8 warps would share an SM, one of 16 warps
    takes twice the rows when that keeps 48 live registers a thread or fewer: the same threads, half the fp32
    partial sums. ``kernel`` names the kernel in the error for rows too long for one program."""
    if n_cols > MAX_ROW_COLUMNS:
        raise ValueError(f"{kernel}: rows of {n_cols} columns exceed the {MAX_ROW_COLUMNS} one program holds")
    block_cols = _next_power_of_2(n_cols)
    block_rows = max(1, min(block_elements // block_cols, _next_power_of_2(n_rows)))
    if num_warps is not None:
        return block_rows, block_cols, num_warps
    tile = block_rows * block_cols
    num_warps = 32 if tile >= 32768 else 16 if tile >= (8192 if backward else 16384) else 8 if tile >= 2048 else 4
    if backward and rows_held and num_warps == 8 and 2 * block_rows <= n_rows and rows_held * tile // 256 <= 48:
        block_rows, num_warps = 2 * block_rows, 16
    return block_rows, block_cols, num_warps


def group_rows(kernel: str, name: str, shape, groups: int, groups_name: str) -> tuple[int, int, tuple, int]:
    """The rows of a kernel over groups of channels of ``name``, ``[batch, channels, ...]`` of ``shape``: each row
    holds one group of a sample, its channels' elements in order, or one of ``chunks`` chunks of whole channels of
    it where a group is longer than one program holds (``group_chunks``). ``(n_rows, group_channels, channels,
    chunks)``: the rows and the channels of each, ``channels`` the ``[batch, channels, the elements of a channel]``
    that inputs which broadcast are laid out against."""
    n_rows, group_channels, channels = group_layout(kernel, name, shape, groups, groups_name)
    chunks = group_chunks(kernel, group_channels, channels[2])
    return n_rows * chunks, group_channels // chunks, channels, chunks


def group_layout(kernel: str, name: str, shape, groups: int, groups_name: str) -> tuple[int, int, tuple]:
    """The rows of a kernel over groups of channels of ``name``, ``[batch, channels, ...]`` of ``shape``, each one
    whole group of a sample: ``(n_rows, group_channels, channels)``, ``channels`` the ``[batch, channels, the elements
    of a channel]`` that per-channel inputs are laid out against. ``kernel`` names the kernel in the error for
    channels that do not split into ``groups_name``=``groups``."""
    if len(shape) < 2 or shape[1] % groups:
        raise ValueError(
            f"{kernel}: {name} has shape {tuple(shape)}; it takes [batch, channels, ...] with channels a multiple of "
            f"{groups_name}={groups}"
        )
    return shape[0] * groups, shape[1] // groups, (shape[0], shape[1], math.prod(shape[2:]))


def group_tile_settings(
    group_channels: int, channel_cols: int, block_elements: int, per_thread: int = 16
) -> tuple[int, int, int]:
    """The tile a program walks its group with, ``[block_channels, block_cols]`` (channels of the group by elements
    of a channel) of at most ``block_elements``, and its warps: ``per_thread`` elements a thread, up to 8 warps. A
    channel's elements go across the tile first (contiguous, wide loads); short channels leave room for several."""
    block_cols = min(_next_power_of_2(channel_cols), block_elements)
    block_channels = min(_next_power_of_2(group_channels), max(1, block_elements // block_cols))
    return block_channels, block_cols, max(1, min(8, block_channels * block_cols // (32 * per_thread)))


def channel_rows(
    kernel: str, name: str, tensor: torch.Tensor, first: str, channels: tuple, inserted: tuple = (), rank: int = 0
) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """A per-channel input of a kernel over groups of channels, ``channels`` the ``[batch, channels, rest]`` of
    ``first``: ``tensor`` made contiguous and how the kernels read its value for channel row ``q`` of ``[batch *
    channels, rest]``, at row ``(q // period) * inner + q % inner`` times ``row_stride`` (``broadcast_layout``);
    ``(row_stride, inner, period)``. Such a kernel reads one value per channel: an input that varies within a
    channel is refused (``kernel`` names the kernel)."""
    row_stride, col_stride, inner, period = broadcast_layout(
        kernel, name, tuple(tensor.shape), first, tuple(channels), inserted, rank
    )
    if col_stride and channels[2] > 1:
        raise ValueError(
            f"{kernel}: {name} has shape {tuple(tensor.shape)}: against {tuple(channels)} of {first} it varies "
            "within a channel, and the kernels read one value per channel"
        )
    return tensor.contiguous(), (row_stride, inner, period)


def group_chunks(kernel: str, group_channels: int, channel_cols: int) -> int:
    """How many chunks of whole channels a group of ``group_channels`` channels of ``channel_cols`` elements is cut
    into so that each fits one program: 1 where the group does, else the fewest that divide its channels. A channel
    longer than one program holds is refused (``kernel`` names the kernel)."""
    if group_channels * channel_cols <= MAX_ROW_COLUMNS:
        return 1
    if channel_cols > MAX_ROW_COLUMNS:
        raise ValueError(
            f"{kernel}: channels of {channel_cols} elements exceed the {MAX_ROW_COLUMNS} one program holds"
        )
    return next(
        c
        for c in range(2, group_channels + 1)
        if group_channels % c == 0 and group_channels // c * channel_cols <= MAX_ROW_COLUMNS
    )


# The fewest columns a piece of a long row holds: fewer would spend the passes on launch and padding.
MIN_PIECE_COLUMNS = 256


def row_chunks(kernel: str, n_cols: int) -> int:
    """How many pieces of consecutive columns a row longer than one program holds is cut into, for the split
    path to walk as it walks ranks' shards: the fewest that divide it into pieces one program holds (128256
    columns: 2 of 64128). A row no such cut divides is refused (``kernel`` names the kernel)."""
    chunks = next(
        (c for c in range(2, n_cols // MIN_PIECE_COLUMNS + 1) if n_cols % c == 0 and n_cols // c <= MAX_ROW_COLUMNS),
        None,
    )
    if chunks is None:
        raise ValueError(
            f"{kernel}: rows of {n_cols} columns exceed the {MAX_ROW_COLUMNS} one program holds, and no cut into "
            f"equal pieces of {MIN_PIECE_COLUMNS} to {MAX_ROW_COLUMNS} columns divides them"
        )
    return chunks


def combine_chunks(chunks: int):
    """The split path's ``reduce(values, op)`` for rows cut into ``chunks`` consecutive rows of their columns (a
    group's chunks of whole channels): each chunk's part of a per-row reduction (fp32, ``[..., rows * chunks]``) is
    combined over its row's chunks in place, in a fixed order, so that every chunk reads the whole row's value."""

    def combine(values: torch.Tensor, op: str) -> None:
        parts = values.view(*values.shape[:-1], -1, chunks)
        whole = {"sum": parts.sum, "max": parts.amax, "min": parts.amin}[op](-1, keepdim=True)
        parts.copy_(whole.expand_as(parts))

    return combine


def broadcast_layout(
    kernel: str, name: str, own: tuple, first: str, shape: tuple, inserted: tuple = (), rank: int = 0
) -> tuple[int, int, int, int]:
    """How row kernels read ``name``, of shape ``own``, that broadcasts against ``shape`` (``first``'s), without
    expanding it: row ``r`` of ``first``'s ``[rows, columns]`` view reads row ``(r // period) * inner + r % inner``
    of it (held contiguous) at ``row_stride``, its columns at ``col_stride`` (0: one value per row); ``(row_stride,
    col_stride, inner, period)``. ``inserted``: the dims the reference inserts before it broadcasts (``unsqueeze``),
    the last first, into an input of ``rank`` dims (0: of any rank). They count in the rank the reference writes them
    for, ``shape``'s less the inserted dims: an input of fewer dims lacks leading ones, which broadcast as torch's
    missing leading dims do (a ``[seq, dim]`` RoPE table unsqueezed at 1 is one ``[1, seq, dim]`` table for every
    batch row; torch would insert at 1 of its own two dims). The broadcast dims before the last must be one run
    (``[batch, 1, hidden]``, ``[1, seq, hidden]``, ``[hidden]``, a run of them between kept dims): a single ``(inner,
    period)`` pair indexes only those. Shared by every generated kernel with such inputs
    (RoPE's cos and sin, modulated norms' scale and shift, GroupNorm's affine)."""
    # The same shapes come back every step (and twice a step, forward and backward): a cache of their layouts keeps
    # the host's time per call near a dict lookup. Under torch.compile the layout is traced as plain arithmetic.
    layout = _layout_of_shapes if torch.compiler.is_compiling() else _cached_layout_of_shapes
    return layout(kernel, name, tuple(own), first, tuple(shape), tuple(inserted), rank)


def _layout_of_shapes(
    kernel: str, name: str, own: tuple, first: str, shape: tuple, inserted: tuple, rank: int
) -> tuple[int, int, int, int]:
    if rank and inserted and len(own) != rank:
        raise ValueError(
            f"{kernel}: {name} has shape {tuple(own)}; the reference unsqueezes it, which the kernels follow for "
            f"{rank} dims"
        )
    aligned = [1] * (len(shape) - len(inserted) - len(own)) + list(own) if inserted else list(own)
    for dim in inserted:
        aligned.insert(dim if dim >= 0 else len(aligned) + dim + 1, 1)
    sizes = [1] * (len(shape) - len(aligned)) + aligned
    if len(aligned) > len(shape) or any(size not in (1, full) for size, full in zip(sizes, shape)):
        raise ValueError(
            f"{kernel}: {name} has shape {tuple(own)}, which does not broadcast against {tuple(shape)} of {first}"
            f"{' as the reference unsqueezes it' if inserted else ''}"
        )
    # Each leading dim of the first input over 1 is kept (the input has it) or broadcast (the input has 1 there).
    kinds = "".join("k" if size == full else "b" for size, full in zip(sizes[:-1], shape[:-1]) if full != 1)
    if "k" in kinds.strip("k"):
        raise ValueError(
            f"{kernel}: {name} has shape {tuple(own)}: against {tuple(shape)} of {first} it broadcasts over dims "
            "that kept dims separate, which the kernels cannot index (one run of broadcast dims)"
        )
    broadcast = [i for i, (size, full) in enumerate(zip(sizes[:-1], shape[:-1])) if size != full]
    inner = math.prod(shape[broadcast[-1] + 1 : -1]) if broadcast else 1
    period = math.prod(shape[broadcast[0] : -1]) if broadcast else 1
    return sizes[-1], 1 if sizes[-1] == shape[-1] else 0, inner, period


_cached_layout_of_shapes = functools.lru_cache(maxsize=1024)(_layout_of_shapes)


def _one_run_shape(own: tuple, shape: tuple, inserted: tuple) -> tuple | None:
    """Where ``own`` broadcasts over the leading dims of ``shape`` and again after a kept dim (GPT-J's sin of ``[1,
    seq, dim]`` against ``[batch, seq, heads, dim]`` once unsqueezed at 2): ``own`` with that leading run at
    ``shape``'s sizes (dims it lacks put in front), against which one broadcast run is left; None for any other."""
    # each dim of ``shape``: the dim of ``own`` aligned with it, "inserted" (the reference unsqueezes it) or None
    aligned: list = list(range(len(own)))
    if inserted:
        aligned = [None] * (len(shape) - len(inserted) - len(own)) + aligned
        for dim in inserted:
            aligned.insert(dim if dim >= 0 else len(aligned) + dim + 1, "inserted")
    aligned = [None] * (len(shape) - len(aligned)) + aligned
    if len(aligned) != len(shape):
        return None
    sizes = [own[a] if isinstance(a, int) else 1 for a in aligned]
    kept = [i for i, (size, full) in enumerate(zip(sizes[:-1], shape[:-1])) if full != 1 and size == full]
    leading = [i for i in range(kept[0]) if shape[i] != 1] if kept else []
    if not leading or not any(sizes[i] != shape[i] for i in range(kept[0], len(shape) - 1) if shape[i] != 1):
        return None
    if any(aligned[i] == "inserted" for i in leading) or any(a == "inserted" for a in aligned[: kept[0]]):
        return None
    front = [shape[i] for i in range(kept[0]) if aligned[i] is None]
    expanded = [shape[i] if i in leading else own[a] for i, a in enumerate(aligned) if isinstance(a, int)]
    return (*front, *expanded)


def broadcast_rows(
    kernel: str, name: str, tensor: torch.Tensor, first: str, shape: tuple, inserted: tuple = (), rank: int = 0
) -> tuple[torch.Tensor, tuple[int, int, int, int]]:
    """``tensor`` made contiguous, as the kernels index it, and how they read it (``broadcast_layout``). One that
    broadcasts over two runs of dims, the first of them leading, is expanded over that one first: a copy of the
    table's size times the leading dims (GPT-J's sin over the batch), far smaller than the first input."""
    expanded = _one_run_shape(tuple(tensor.shape), tuple(shape), tuple(inserted))
    if expanded is not None and not (rank and inserted and tensor.dim() != rank):
        tensor, rank = tensor.expand(expanded), len(expanded) if rank else 0
    return tensor.contiguous(), broadcast_layout(kernel, name, tuple(tensor.shape), first, tuple(shape), inserted, rank)


@triton.jit
def _broadcast_sum_kernel(
    grad_ptr,
    out_ptr,
    n_cols,
    inner,
    period,
    repeats,
    SUM_COLS: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    # Program (o, c): row o of a broadcast input's gradient, the sum of the ``repeats`` rows of the per-element
    # gradient that read it (``inner`` apart from the first), at column block c, or over all columns (SUM_COLS: the
    # input holds one value per row). Tiles of BLOCK_ROWS of those rows at a time; fixed order, no atomics.
    out_row = tl.program_id(0).to(tl.int64)
    first = (out_row // inner) * period + out_row % inner
    tile_rows = tl.arange(0, BLOCK_ROWS)[:, None]
    acc = tl.zeros((BLOCK_ROWS, BLOCK_COLS), dtype=tl.float32)
    if SUM_COLS:
        cols = tl.arange(0, BLOCK_COLS)[None, :]
        col_start = 0
        while col_start < n_cols:
            repeat = 0
            while repeat < repeats:
                mask = (repeat + tile_rows < repeats) & (col_start + cols < n_cols)
                rows = first + (repeat + tile_rows) * inner
                acc += tl.load(grad_ptr + rows * n_cols + (col_start + cols), mask=mask, other=0.0)
                repeat += BLOCK_ROWS
            col_start += BLOCK_COLS
        tl.store(out_ptr + out_row, tl.sum(acc).to(out_ptr.dtype.element_ty))
    else:
        cols = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)[None, :]
        repeat = 0
        while repeat < repeats:
            mask = (repeat + tile_rows < repeats) & (cols < n_cols)
            rows = first + (repeat + tile_rows) * inner
            acc += tl.load(grad_ptr + rows * n_cols + cols, mask=mask, other=0.0)
            repeat += BLOCK_ROWS
        total = tl.sum(acc, axis=0, keep_dims=True)
        tl.store(out_ptr + out_row * n_cols + cols, total.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def broadcast_sum(grad: torch.Tensor, own: torch.Size, dtype: torch.dtype, inserted: tuple = ()) -> torch.Tensor:
    """The gradient of an input of shape ``own`` that broadcasts against the tensor ``grad`` is the gradient of
    (``broadcast_layout``): ``grad`` (per element, fp32, contiguous) summed over the broadcast dims, in ``dtype``.
    One launch that reads ``grad`` in place by the layout's rows and sums each output in a fixed order, without
    atomics, so that the result is the same on every run."""
    expanded = _one_run_shape(tuple(own), tuple(grad.shape), tuple(inserted))
    if expanded is not None:  # summed over the second run here, over the leading one (the expanded dims) after
        total = broadcast_sum(grad, torch.Size(expanded), torch.float32, inserted)
        total = total.sum(tuple(range(len(expanded) - len(own)))) if len(expanded) > len(own) else total
        dims = tuple(i for i, (size, full) in enumerate(zip(own, total.shape)) if size == 1 and full != 1)
        return (total.sum(dims, keepdim=True) if dims else total).to(dtype)
    row_stride, col_stride, inner, period = broadcast_layout(
        "broadcast_sum", "the gradient", tuple(own), "grad", tuple(grad.shape), inserted, len(own)
    )
    n_cols = grad.shape[-1]
    out = torch.empty(own, dtype=dtype, device=grad.device)
    # Up to 16 of the rows summed into one per tile (one where each row is only summed over its columns).
    block_rows, block_cols = min(16, _next_power_of_2(period // inner)), min(_next_power_of_2(n_cols), 256)
    grid = (out.numel() // row_stride if row_stride else 0, 1 if col_stride == 0 else triton.cdiv(n_cols, block_cols))
    _broadcast_sum_kernel[grid](
        grad,
        out,
        n_cols,
        inner,
        period,
        period // inner,
        SUM_COLS=col_stride == 0,
        BLOCK_ROWS=block_rows,
        BLOCK_COLS=block_cols,
    )
    return out


def column_block_settings(n_rows: int, n_cols: int, block_cols: int) -> tuple[int, int, int, int]:
    """The tile of a row kernel's pass that reduces nothing (the last of the split path): column blocks of up to
    2048 of ``block_cols``, rows to fill about 4096 elements, 8 warps, and the column blocks of a row (at least one:
    a rank may hold no columns)."""
    block_cols = min(block_cols, 2048)
    block_rows = max(1, min(4096 // block_cols, _next_power_of_2(n_rows)))
    return block_rows, block_cols, 8, max(1, -(-n_cols // block_cols))


def persistent_programs(
    n_rows: int, block_rows: int, num_sms: int, programs_per_sm: int, num_warps: int | None = None, col_blocks: int = 1
) -> int:
    """Programs of a persistent grid that sums parameter gradients over the row tiles it walks: ``programs_per_sm``
    per SM, spread over ``col_blocks`` column blocks, never more than the row tiles. With ``num_warps``, only as many
    as fit beside each other at 128 registers a thread: one of 16 warps takes the whole register file, a second
    would only follow it (and add a partial sum)."""
    if num_warps is not None:
        programs_per_sm = max(1, min(programs_per_sm, 65536 // (128 * 32 * num_warps)))
    return max(1, min(-(-n_rows // block_rows), max(1, programs_per_sm * num_sms // col_blocks)))


def _interpreted() -> bool:
    """Kernels run under Triton's CPU interpreter (``TRITON_INTERPRET=1``), which has no device to ask and runs no
    pipelined loop with a runtime bound."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def backward_schedule(tile: int, num_warps: int, load_bytes: int, rows_held: int) -> tuple[bool, bool]:
    """(split, pipeline_loads) for a fused row backward of ``tile`` elements per program that keeps ``rows_held``
    full tiles live, each element loading ``load_bytes``: past 96 live registers a thread it spills and the split
    path is faster; up to 64 its row walk gains from pipelined loads, which buffer two tiles of loads in shared
    memory and which Triton's interpreter (TRITON_INTERPRET=1) cannot run."""
    live = rows_held * tile // (32 * num_warps)
    split = live > 96
    if split or live > 64 or _interpreted():
        return split, False
    return False, 2 * tile * load_bytes <= _shared_memory_bytes(torch.cuda.current_device())


# Shared memory one program may use on an H100 or H200: what the interpreter (no device to ask) plans with, so that
# CPU tests take the schedules those GPUs take.
_HOPPER_SHARED_MEMORY_BYTES = 232448


def sweep_settings(n_cols: int, load_bytes: int, param_bytes: int) -> tuple[int, int, int, bool] | None:
    """(block_cols, col_blocks, num_warps, pipeline_loads) of a row backward that sweeps each row whole for its sums
    (programs side by side owning one column block each of 8192 columns at most), or None where its walk cannot be
    pipelined: three stages of a row's loads (``load_bytes`` an element) and the row's parameters (``param_bytes``)
    must fit in shared memory. Unpipelined, the walk waits on each row's loads and gains little over the split path,
    which leaves d(y)'s buffer free for d(x)."""
    block_cols = min(_next_power_of_2(n_cols), 8192)
    col_blocks = -(-n_cols // block_cols)
    tile = col_blocks * block_cols
    interpreted = _interpreted()
    shared = _HOPPER_SHARED_MEMORY_BYTES if interpreted else _shared_memory_bytes(torch.cuda.current_device())
    if 3 * tile * load_bytes + tile * param_bytes + 1024 > shared:
        return None
    # Under the interpreter the same sweep runs as a while loop (it takes no runtime bound in range()).
    return block_cols, col_blocks, 8, not interpreted


_SHARED_MEMORY_BYTES: dict[int, int] = {}


@torch.compiler.assume_constant_result
def _shared_memory_bytes(device: int) -> int:
    """Shared memory one program may use on GPU ``device``: a constant of the graph under torch.compile, which cannot
    trace the driver's query (nor a ``functools.cache`` wrapper around it: Dynamo traces into the wrapper and drops
    the mark), so the value is kept here by hand."""
    if device not in _SHARED_MEMORY_BYTES:
        properties = triton.runtime.driver.active.utils.get_device_properties(device)
        _SHARED_MEMORY_BYTES[device] = properties["max_shared_mem"]
    return _SHARED_MEMORY_BYTES[device]


# Whether this torch counts the references to a tensor and to its storage (private helpers, present since 2.x).
_COUNTS_REFERENCES = hasattr(torch.Tensor, "_use_count") and hasattr(torch._C, "_storage_Use_Count")


class _CountGradientUses(torch.autograd.Function):
    """The identity, whose backward records the use count of a gradient that autograd alone holds."""

    uses = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        _CountGradientUses.uses.append(grad._use_count())
        return grad


def _uses_of_autograds_gradient() -> int | None:
    """The use count, inside a backward, of a gradient nothing but autograd holds: the engine keeps a reference of
    its own during the call in some torch versions (2.11) and not in others (2.13). None where it cannot be measured
    (then no gradient buffer is reused)."""
    if not _COUNTS_REFERENCES:
        return None
    try:
        # Measured in grad mode even where this module is imported under no_grad or inference_mode.
        with torch.inference_mode(False), torch.enable_grad():
            x = torch.zeros(2, requires_grad=True)
            (_CountGradientUses.apply(x) * 2.0).sum().backward()  # mul's backward makes a new buffer: autograd's alone
        return _CountGradientUses.uses.pop()
    except (RuntimeError, IndexError):
        return None


_AUTOGRAD_GRADIENT_USES = _uses_of_autograds_gradient()


def reusable_gradient(grad: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether a backward that reads each tile of ``grad`` (the output gradient autograd handed it) before it writes
    the same tile of an input's gradient may write that gradient over ``grad``: a contiguous ``dtype`` buffer that
    only autograd holds. That is autograd's own test before it reuses a gradient buffer (AccumulateGrad): nothing
    but autograd refers to the tensor, and no other tensor shares its storage except the base it is a view of,
    itself referred to by that view alone. A gradient the caller passed to ``backward``, one that another branch of
    the graph also receives (an output added to a residual) and one that builds a graph (``create_graph``) are left
    intact; under torch.compile the compiler plans the buffers. As for AccumulateGrad, a Python hook that keeps the
    very tensor it was handed is not seen (the count has one reference for every Python one). Call it from a
    backward: autograd's own reference is counted as a backward sees it."""
    if _AUTOGRAD_GRADIENT_USES is None or torch.compiler.is_compiling():
        return False
    if grad.dtype != dtype or grad.requires_grad or not grad.is_contiguous():
        return False
    if grad._use_count() != _AUTOGRAD_GRADIENT_USES:
        return False
    # A base only the view refers to (and, as a tensor, the one Python object that asking for it makes).
    is_view = grad._base is not None
    if is_view and (grad._base._use_count() != 2 or _base_references(grad) != _ALONE_BASE_REFERENCES):
        return False
    # Counted with the storage object that untyped_storage() makes for the question.
    return torch._C._storage_Use_Count(grad.untyped_storage()._cdata) == (3 if is_view else 2)


def _base_references(view: torch.Tensor) -> int:
    base = view._base
    return sys.getrefcount(base)


# The Python references _base_references counts where nothing else refers to the base (it varies with the version).
_ALONE_BASE_REFERENCES = _base_references(torch.empty(2).view(2))


# Kernels generated before these names moved import them from here: the module that has them now.
_MOVED = {
    "PLAIN_TYPES": "dtensor_utils",
    "DTensorLayout": "dtensor_utils",
    "dtensor_layout": "dtensor_utils",
    "local_columns": "dtensor_utils",
    "own_buffer": "utils",
}


def __getattr__(name: str):
    if name in _MOVED:
        return getattr(importlib.import_module(f"liger_kernel.ops.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
