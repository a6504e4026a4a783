"""How kernels that reduce each row (norms, softmax-like rows) launch: tiles of whole rows, rows longer than one
program holds cut into pieces, groups of channels as rows, the backward's schedule and its persistent grid for
parameter gradients, and when a backward may write its input's gradient over autograd's output gradient."""

import math
import os
import sys

import torch
import triton


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


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
