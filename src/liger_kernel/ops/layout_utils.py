"""How element-wise and row kernels lay their tensors out for a launch: inputs as ``[rows, columns]``, inputs that
broadcast against the first read by row without expanding them (and their gradients summed back to their shapes), and
the tiles element-wise programs take. Row kernels' launch settings: ``row_utils.py``; DTensor arguments:
``dtensor_utils.py``."""

import functools
import importlib
import math

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


# Kernels generated before these names moved import them from here: the module that has them now.
_MOVED = {
    "PLAIN_TYPES": "dtensor_utils",
    "DTensorLayout": "dtensor_utils",
    "dtensor_layout": "dtensor_utils",
    "local_columns": "dtensor_utils",
    "own_buffer": "utils",
    "MAX_ROW_COLUMNS": "row_utils",
    "MIN_PIECE_COLUMNS": "row_utils",
    "backward_schedule": "row_utils",
    "column_block_settings": "row_utils",
    "combine_chunks": "row_utils",
    "group_chunks": "row_utils",
    "group_layout": "row_utils",
    "group_rows": "row_utils",
    "group_tile_settings": "row_utils",
    "persistent_programs": "row_utils",
    "reusable_gradient": "row_utils",
    "row_chunks": "row_utils",
    "row_tile_settings": "row_utils",
    "sweep_settings": "row_utils",
}


def __getattr__(name: str):
    if name in _MOVED:
        return getattr(importlib.import_module(f"liger_kernel.ops.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
