"""The shared layout helpers of generated kernels (liger_kernel/ops/layout_utils.py): rows, launch shapes, tiles and
broadcast inputs, checked on the CPU against what each promises. Row kernels' helpers: test_row_utils.py."""

import importlib

import pytest
import torch
import triton
import triton.language as tl

from liger_kernel.ops import layout_utils
from liger_kernel.ops.layout_utils import as_rows
from liger_kernel.ops.layout_utils import broadcast_layout
from liger_kernel.ops.layout_utils import broadcast_rows
from liger_kernel.ops.layout_utils import broadcast_sum
from liger_kernel.ops.layout_utils import launch_shape
from liger_kernel.ops.layout_utils import tile_launch
from liger_kernel.ops.layout_utils import tile_of_program
from liger_kernel.ops.layout_utils import tile_settings
from liger_kernel.ops.layout_utils import trig_tile_settings


def test_as_rows_views_evenly_spaced_rows_and_copies_strided_columns():
    x = torch.randn(2, 3, 8)
    rows = as_rows(x, 8)
    assert rows.shape == (6, 8) and rows.data_ptr() == x.data_ptr()
    wide = torch.randn(6, 16)
    half = as_rows(wide[:, 8:], 8)  # one half of a fused projection: a view with the wide row stride
    assert half.stride() == (16, 1) and half.data_ptr() == wide[:, 8:].data_ptr()
    transposed = torch.randn(8, 6).t()
    copied = as_rows(transposed, 8)
    assert copied.stride(-1) == 1 and torch.equal(copied, transposed)


# Inputs of [2, 3, 4, 8]-shaped kernels that broadcast: a run of broadcast leading dims (between kept ones too),
# per-row values, a lower rank; two runs of which the first leads (held expanded over it: [2, 3, 1, 8]).
BROADCAST_SHAPES = [
    (8,),
    (1, 3, 1, 8),
    (3, 1, 8),
    (2, 1, 1, 8),
    (2, 1, 4, 8),
    (1, 3, 4, 8),
    (2, 3, 1, 8),
    (1, 1, 4, 8),
    (2, 3, 4, 1),
    (1, 8),
    (2, 1, 1, 1),
]


@pytest.mark.parametrize("own", BROADCAST_SHAPES)
def test_broadcast_layout_reads_each_row_where_torch_broadcasts_it(own):
    shape = (2, 3, 4, 8)
    tensor = torch.randn(own)
    held, (row_stride, col_stride, inner, period) = broadcast_rows("k", "scale", tensor, "x", shape)
    expanded = tensor.expand(shape).reshape(-1, shape[-1])
    rows = torch.arange(expanded.shape[0])[:, None]
    cols = torch.arange(shape[-1])[None, :]
    read = held.flatten()[(rows // period * inner + rows % inner) * row_stride + cols * col_stride]
    assert torch.equal(read, expanded)


def test_broadcast_layout_inserts_the_unsqueezed_dims_and_refuses_what_it_cannot_index():
    # [batch, hidden] unsqueezed at dim 1 reads like [batch, 1, hidden].
    assert broadcast_layout("k", "shift", (2, 8), "x", (2, 5, 8), (1,), 2) == (8, 1, 1, 5)
    # A [seq, dim] table the reference unsqueezes at 1 lacks the leading batch dim it writes that 1 for: [1, 1, seq,
    # dim] against [batch, heads, seq, dim], row r reading r % seq (torch would insert at 1 of its own two dims).
    assert broadcast_layout("k", "cos", (5, 8), "q", (2, 4, 5, 8), (1,)) == (8, 1, 5, 40)
    with pytest.raises(ValueError, match=r"^k: shift has shape \(2, 1, 8\); the reference unsqueezes it"):
        broadcast_layout("k", "shift", (2, 1, 8), "x", (2, 5, 8), (1,), 2)
    with pytest.raises(ValueError, match=r"^k: scale has shape \(3, 8\), which does not broadcast against"):
        broadcast_layout("k", "scale", (3, 8), "x", (2, 5, 8))
    with pytest.raises(ValueError, match=r"kept dims separate"):  # two runs of broadcast dims: no (inner, period)
        broadcast_layout("k", "scale", (1, 3, 1, 8), "x", (2, 3, 4, 8))


@pytest.mark.parametrize("own", BROADCAST_SHAPES)
def test_broadcast_sum_is_the_gradient_torch_gives_a_broadcast_input(own):
    shape = (2, 3, 4, 8)
    tensor = torch.randn(own, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(shape, dtype=torch.float64)
    (tensor.expand(shape) * grad).sum().backward()
    summed = broadcast_sum(grad.float().contiguous(), tensor.shape, torch.float32)
    assert summed.shape == tensor.shape and summed.dtype == torch.float32
    torch.testing.assert_close(summed.double(), tensor.grad, rtol=1e-5, atol=1e-5)


def test_a_table_broadcast_over_the_batch_and_the_heads_is_held_expanded_over_the_batch():
    """GPT-J's sin: [1, seq, dim] unsqueezed at 2 against [batch, seq, heads, dim] broadcasts over two runs of dims;
    it is held as [batch, seq, dim] (one run left), and its gradient summed over both."""
    sin = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)
    held, (row_stride, col_stride, inner, period) = broadcast_rows(
        "k", "sin", sin.detach(), "x", (2, 5, 3, 8), (-2,), 3
    )
    assert held.shape == (2, 5, 8) and (row_stride, col_stride, inner, period) == (8, 1, 1, 3)
    grad = torch.randn(2, 5, 3, 8, dtype=torch.float64)
    (sin.unsqueeze(-2).expand(2, 5, 3, 8) * grad).sum().backward()
    summed = broadcast_sum(grad.float(), sin.shape, torch.float32, (-2,))
    torch.testing.assert_close(summed.double(), sin.grad, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"kept dims separate"):  # an inserted dim leading a run: not expanded
        broadcast_rows("k", "t", torch.randn(2, 1, 8), "x", (3, 2, 4, 8), (0,))


def test_broadcast_sum_of_a_table_without_the_leading_dims_sums_them_too():
    grad = torch.randn(2, 4, 5, 8)
    summed = broadcast_sum(grad, torch.Size((5, 8)), torch.float32, (1,))
    torch.testing.assert_close(summed, grad.sum((0, 1)), rtol=1e-5, atol=1e-5)


def test_launch_shape_walks_back_to_back_rows_as_one():
    x = torch.randn(4, 8)
    assert launch_shape(4, 8, x, torch.randn(4, 8)) == (1, 32)
    assert launch_shape(4, 8, x, torch.randn(4, 16)[:, :8]) == (4, 8)  # a strided input keeps the rows
    assert launch_shape(1, 8, x[:1]) == (1, 8)


def _padded(n_cols, block_cols):
    return -(-n_cols // block_cols) * block_cols


@pytest.mark.parametrize("n_rows", [1, 3, 64, 1000])
@pytest.mark.parametrize("n_cols", [1, 5, 100, 1024, 1500, 2048, 3000, 4096, 11008, 14336])
def test_tile_settings_fill_the_tile_and_pad_the_least(n_rows, n_cols):
    block_rows, block_cols, num_warps = tile_settings(n_rows, n_cols, block_elements=4096, max_block_cols=2048)
    assert block_cols & (block_cols - 1) == 0 and block_rows & (block_rows - 1) == 0
    assert block_rows * block_cols <= 4096
    if n_cols <= 2048:
        assert block_cols >= n_cols  # short rows are whole in a tile
    else:
        widths = (1024, 2048) if n_rows > 1 else (2048,)
        assert _padded(n_cols, block_cols) == min(_padded(n_cols, w) for w in widths)
    assert block_rows <= max(1, n_rows) * 2 - 1  # no more rows than the next power of 2 holds
    assert num_warps == (8 if block_rows * block_cols >= 4096 else 4)
    assert tile_settings(n_rows, n_cols, 4096, 2048, num_warps=2)[2] == 2


def test_trig_tile_settings_take_wider_slices_at_16_warps():
    assert trig_tile_settings(16, 14336, 4096) == (1, 4096, 16)
    assert trig_tile_settings(64, 100, 4096) == (32, 128, 16)


@pytest.mark.parametrize(
    "n_rows, n_cols, block_rows, block_cols", [(1, 4096, 1, 2048), (5, 100, 4, 128), (8, 256, 4, 64)]
)
def test_tile_launch_covers_every_element_once(n_rows, n_cols, block_rows, block_cols):
    grid, tile = tile_launch(n_rows, n_cols, block_rows, block_cols, 4)
    row_blocks, col_blocks = -(-n_rows // block_rows), -(-n_cols // block_cols)
    assert grid == (row_blocks * col_blocks,)
    assert tile == {
        "BLOCK_ROWS": block_rows,
        "BLOCK_COLS": block_cols,
        "WALK_ROWS": n_rows > 1,
        "WHOLE_TILES": n_rows % block_rows == 0 and n_cols % block_cols == 0,
        "num_warps": 4,
    }


@triton.jit
def _count_tiles_kernel(
    counts_ptr,
    n_rows,
    n_cols,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    WALK_ROWS: tl.constexpr,
    WHOLE_TILES: tl.constexpr,
):
    # Each program adds 1 to every element its tile covers (unmasked lanes only).
    row_start, col_start, tile_rows, cols, col_mask, mask = tile_of_program(
        tl.program_id(0), n_rows, n_cols, BLOCK_ROWS, BLOCK_COLS, WALK_ROWS, WHOLE_TILES
    )
    offsets = (row_start + tile_rows) * n_cols + (col_start + cols)[None, :]
    mask = mask & col_mask[None, :]  # the column mask a per-channel parameter's load takes is the tile's own
    tl.store(counts_ptr + offsets, tl.load(counts_ptr + offsets, mask=mask, other=0) + 1, mask=mask)


@pytest.mark.parametrize(
    "n_rows, n_cols, block_rows, block_cols", [(1, 4096, 1, 2048), (5, 100, 4, 128), (8, 256, 4, 64), (1, 300, 1, 128)]
)
def test_the_programs_of_a_tile_launch_cover_every_element_once(n_rows, n_cols, block_rows, block_cols):
    """tile_of_program, which every element-wise kernel starts with: over the grid of tile_launch, each element is
    in exactly one program's tile, flat walks (one row) and walks of rows, whole tiles and masked ones."""
    grid, tile = tile_launch(n_rows, n_cols, block_rows, block_cols, 4)
    counts = torch.zeros(n_rows, n_cols, dtype=torch.int32)
    tile.pop("num_warps")
    _count_tiles_kernel[grid](counts, n_rows, n_cols, **tile)
    assert torch.equal(counts, torch.ones_like(counts))


def test_kernels_generated_before_names_moved_out_still_import_them_from_here():
    """Each name that moved to another module is that module's object when imported from here. A checkout that was
    given this module without the other one (or an ops/utils.py without the helper) has no kernel importing it."""
    forwarded = 0
    for name, module in layout_utils._MOVED.items():
        try:
            home = importlib.import_module(f"liger_kernel.ops.{module}")
        except ImportError:
            continue
        if hasattr(home, name):
            assert getattr(layout_utils, name) is getattr(home, name), name
            forwarded += 1
    # A kernel that imports this module imports dtensor_utils too (PLAIN_TYPES): its names at least are checked.
    assert forwarded >= 4
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        layout_utils.nothing_here
