"""The shared layout helpers of generated kernels (liger_kernel/ops/layout_utils.py): rows, launch shapes, tiles and
broadcast inputs, checked on the CPU against what each promises."""

import os
import subprocess
import sys

from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

from liger_kernel.ops import layout_utils
from liger_kernel.ops.layout_utils import as_rows
from liger_kernel.ops.layout_utils import backward_schedule
from liger_kernel.ops.layout_utils import broadcast_layout
from liger_kernel.ops.layout_utils import broadcast_rows
from liger_kernel.ops.layout_utils import broadcast_sum
from liger_kernel.ops.layout_utils import column_block_settings
from liger_kernel.ops.layout_utils import launch_shape
from liger_kernel.ops.layout_utils import persistent_programs
from liger_kernel.ops.layout_utils import reusable_gradient
from liger_kernel.ops.layout_utils import row_chunks
from liger_kernel.ops.layout_utils import row_tile_settings
from liger_kernel.ops.layout_utils import sweep_settings
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


class _Verdict(torch.autograd.Function):
    """The identity, whose backward records reusable_gradient's verdict on the gradient autograd hands it."""

    seen = []

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        _Verdict.seen.append(reusable_gradient(grad, ctx.dtype))
        return grad, None


def _verdict(step, dtype=torch.float32, gradient=None):
    """reusable_gradient's verdict inside the backward of ``step`` (a function of the identity's output)."""
    x = torch.randn(4, 8, requires_grad=True)
    step(_Verdict.apply(x, dtype)).backward(gradient)
    return _Verdict.seen.pop()


def test_a_gradient_buffer_is_reusable_only_where_nothing_else_refers_to_it():
    # Inside a backward: autograd's own buffer (mul's backward makes it), also as a view whose base only it refers
    # to; not the caller's gradient, one an add also hands to a branch that reads it later, nor one of another dtype.
    assert _verdict(lambda y: (y * 2).sum())
    assert _verdict(lambda y: (y.view(-1) * 2).sum())
    assert not _verdict(lambda y: y, gradient=torch.randn(4, 8))
    # The residual branch's op is older than the identity: autograd runs its backward after the identity's.
    residual = torch.randn(4, 8, requires_grad=True) * 1
    assert not _verdict(lambda y: ((y + residual) * 2).sum())
    assert not _verdict(lambda y: (y * 2).sum(), torch.bfloat16)
    # Anywhere: a tensor that is not contiguous, builds a graph, or shares its storage with another referred to.
    assert not reusable_gradient(torch.randn(8, 4).t(), torch.float32)
    assert not reusable_gradient(torch.randn(4, 8, requires_grad=True), torch.float32)
    held = torch.randn(4, 8)
    also = held.view(4, 8)  # another tensor on the storage (its base) and another reference to held
    assert not reusable_gradient(held, torch.float32)
    assert not reusable_gradient(also, torch.float32)  # its base is held by name too
    detached = torch.randn(4, 8)
    alias = detached.detach()  # shares the storage without being a view of it
    assert not reusable_gradient(detached, torch.float32) and not reusable_gradient(alias, torch.float32)


def test_autograds_own_count_is_measured_when_imported_under_inference_mode():
    """The count reusable_gradient compares with is measured by a backward at import: an import under
    inference_mode (or no_grad) measures it in grad mode rather than failing."""
    code = (
        "import torch\n"
        "with torch.inference_mode():\n"
        "    from liger_kernel.ops import layout_utils\n"
        "assert layout_utils._AUTOGRAD_GRADIENT_USES is not None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": "1"})


def test_row_tiles_hold_whole_rows_with_warps_that_grow_with_the_tile():
    assert row_tile_settings("k", 16384, 4096, 4096) == (1, 4096, 8)
    assert row_tile_settings("k", 16384, 100, 4096) == (32, 128, 8)
    assert row_tile_settings("k", 3, 100, 4096) == (4, 128, 4)  # no more rows than there are
    assert row_tile_settings("k", 16384, 8192, 4096) == (1, 8192, 8)
    assert row_tile_settings("k", 16384, 8192, 4096, backward=True) == (1, 8192, 16)  # more work per element
    assert row_tile_settings("k", 16384, 4096, 4096, num_warps=4) == (1, 4096, 4)
    # A backward summing parameter gradients: 16 warps over two rows while that keeps 48 live registers a thread.
    assert row_tile_settings("k", 16384, 4096, 4096, backward=True, rows_held=3) == (2, 4096, 16)
    assert row_tile_settings("k", 16384, 4096, 4096, backward=True, rows_held=4) == (1, 4096, 8)
    assert row_tile_settings("k", 1, 4096, 4096, backward=True, rows_held=3) == (1, 4096, 8)  # one row only
    with pytest.raises(ValueError, match="^my_norm: rows of 70000 columns exceed the 65536 one program holds$"):
        row_tile_settings("my_norm", 4, 70000, 4096)


def test_rows_longer_than_one_program_holds_are_cut_into_the_fewest_equal_pieces_it_holds():
    assert row_chunks("k", 128256) == 2  # Llama 3's vocabulary: 2 pieces of 64128
    assert row_chunks("k", 151936) == 4  # Qwen's: 37984
    assert row_chunks("k", 256000) == 4  # Gemma's: 64000
    message = "^my_softmax: rows of {} columns exceed the 65536 one program holds, and no cut into equal pieces"
    with pytest.raises(ValueError, match=message.format(131101)):
        row_chunks("my_softmax", 131101)  # a prime: only pieces of one column divide it
    with pytest.raises(ValueError, match=message.format(196611)):
        row_chunks("my_softmax", 3 * 65537)  # 3 pieces of 65537 do not fit, the next cut is pieces of 3 columns


def test_column_blocks_and_persistent_grids():
    assert column_block_settings(3, 9000, 16384) == (2, 2048, 8, 5)
    assert column_block_settings(64, 100, 128) == (32, 128, 8, 1)
    assert column_block_settings(4, 0, 1)[3] == 1  # a rank that holds no columns still launches one block
    # Two programs an SM, or one where a program of 16 warps takes the whole register file; never more than the tiles.
    assert persistent_programs(16384, 2, 132, 2, num_warps=8) == 264
    assert persistent_programs(16384, 2, 132, 2, num_warps=16) == 132
    assert persistent_programs(3, 4, 132, 2, num_warps=8) == 1
    assert persistent_programs(16384, 2, 132, 2, col_blocks=5) == 52  # spread over the column blocks


def test_the_backward_schedule_splits_spilling_rows_and_pipelines_small_ones(monkeypatch):
    assert backward_schedule(16384, 16, 4, 4) == (True, False)  # 128 live registers a thread: split
    assert backward_schedule(4096, 8, 4, 4) == (False, False)  # interpreted: never pipelined
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    # The device index from a stand-in namespace, not a lambda set on torch.cuda: Dynamo may take anything it reads
    # off torch.cuda for a torch op (it did once a gloo group had run in the process: "returned non-Tensor").
    monkeypatch.setattr(layout_utils, "torch", SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0)))
    monkeypatch.setattr(layout_utils, "_shared_memory_bytes", lambda device: 232448)
    assert backward_schedule(4096, 8, 4, 4) == (False, True)
    assert backward_schedule(8192, 8, 4, 3) == (False, False)  # 96 live registers: fused, not pipelined
    assert backward_schedule(16384, 32, 8, 3) == (False, False)  # two fp32 tiles of loads exceed shared memory


def test_the_sweep_takes_rows_whose_three_stages_of_loads_fit_shared_memory(monkeypatch):
    """(block_cols, col_blocks, num_warps, pipeline_loads): blocks of at most 8192 columns, one program each; three
    stages of the row's loads (x and d(y): load_bytes an element) beside its parameters in shared memory, or no sweep.
    The interpreter plans with an H100's / H200's 227 KB and runs the walk unpipelined."""
    assert sweep_settings(14336, 4, 2) == (8192, 2, 8, False)  # bf16: 3 x 64 KB + 32 KB
    assert sweep_settings(9000, 4, 2) == (8192, 2, 8, False)
    assert sweep_settings(14336, 8, 4) is None  # fp32: 3 x 128 KB
    assert sweep_settings(32768, 4, 2) is None  # four blocks: 3 x 128 KB
    assert sweep_settings(4096, 4, 0) == (4096, 1, 8, False)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    # The device index from a stand-in namespace, not a lambda set on torch.cuda: Dynamo may take anything it reads
    # off torch.cuda for a torch op (it did once a gloo group had run in the process: "returned non-Tensor").
    monkeypatch.setattr(layout_utils, "torch", SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0)))
    monkeypatch.setattr(layout_utils, "_shared_memory_bytes", lambda device: 232448)
    assert sweep_settings(14336, 4, 2) == (8192, 2, 8, True)
    monkeypatch.setattr(layout_utils, "_shared_memory_bytes", lambda device: 101376)  # a program's 99 KB elsewhere
    assert sweep_settings(14336, 4, 2) is None


def test_the_shared_memory_query_is_a_constant_of_a_compiled_graph(monkeypatch):
    """torch.compile(fullgraph=True) of a step that picks its backward schedule: the driver's query runs once, outside
    the trace (a query Dynamo stepped into would break the graph, as one behind ``functools.cache`` did on a GPU).
    Dynamo's trace is what is checked: the eager backend compiles no code."""
    queries = []

    def device_properties(device):
        queries.append(device)
        torch._dynamo.graph_break()  # a fullgraph trace that steps in here fails
        return {"max_shared_mem": 232448}

    driver = SimpleNamespace(active=SimpleNamespace(utils=SimpleNamespace(get_device_properties=device_properties)))
    monkeypatch.setattr(layout_utils, "triton", SimpleNamespace(runtime=SimpleNamespace(driver=driver)))
    monkeypatch.setattr(layout_utils, "_SHARED_MEMORY_BYTES", {})
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    # The device index from a stand-in namespace, not a lambda set on torch.cuda: Dynamo may take anything it reads
    # off torch.cuda for a torch op (it did once a gloo group had run in the process: "returned non-Tensor").
    monkeypatch.setattr(layout_utils, "torch", SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0)))

    def step(x):
        return x * 2 if backward_schedule(4096, 8, 4, 4)[1] else x

    torch._dynamo.reset()
    try:
        assert torch.equal(torch.compile(step, fullgraph=True, backend="eager")(torch.ones(3)), torch.full((3,), 2.0))
    finally:
        torch._dynamo.reset()
    assert queries == [0]


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
    from liger_kernel.ops import dtensor_utils
    from liger_kernel.ops import utils
    from liger_kernel.ops.layout_utils import PLAIN_TYPES as moved_types  # noqa: N811
    from liger_kernel.ops.layout_utils import dtensor_layout as moved_layout
    from liger_kernel.ops.layout_utils import own_buffer as moved_buffer

    assert moved_types is dtensor_utils.PLAIN_TYPES and moved_layout is dtensor_utils.dtensor_layout
    assert moved_buffer is utils.own_buffer
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        layout_utils.nothing_here
