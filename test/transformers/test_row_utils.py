"""The shared helpers of generated row kernels (liger_kernel/ops/row_utils.py): row tiles, pieces of long rows, the
backward's schedule and persistent grids, and when a gradient buffer may be reused, checked on the CPU against what
each promises."""

import os
import subprocess
import sys

from types import SimpleNamespace

import pytest
import torch

from liger_kernel.ops import row_utils
from liger_kernel.ops.row_utils import backward_schedule
from liger_kernel.ops.row_utils import column_block_settings
from liger_kernel.ops.row_utils import persistent_programs
from liger_kernel.ops.row_utils import reusable_gradient
from liger_kernel.ops.row_utils import row_chunks
from liger_kernel.ops.row_utils import row_tile_settings
from liger_kernel.ops.row_utils import sweep_settings


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
        "    from liger_kernel.ops import row_utils\n"
        "assert row_utils._AUTOGRAD_GRADIENT_USES is not None\n"
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
    monkeypatch.setattr(row_utils, "torch", SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0)))
    monkeypatch.setattr(row_utils, "_shared_memory_bytes", lambda device: 232448)
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
    monkeypatch.setattr(row_utils, "torch", SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0)))
    monkeypatch.setattr(row_utils, "_shared_memory_bytes", lambda device: 232448)
    assert sweep_settings(14336, 4, 2) == (8192, 2, 8, True)
    monkeypatch.setattr(row_utils, "_shared_memory_bytes", lambda device: 101376)  # a program's 99 KB elsewhere
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
    monkeypatch.setattr(row_utils, "triton", SimpleNamespace(runtime=SimpleNamespace(driver=driver)))
    monkeypatch.setattr(row_utils, "_SHARED_MEMORY_BYTES", {})
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    # The device index from a stand-in namespace, not a lambda set on torch.cuda: Dynamo may take anything it reads
    # off torch.cuda for a torch op (it did once a gloo group had run in the process: "returned non-Tensor").
    monkeypatch.setattr(row_utils, "torch", SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0)))

    def step(x):
        return x * 2 if backward_schedule(4096, 8, 4, 4)[1] else x

    torch._dynamo.reset()
    try:
        assert torch.equal(torch.compile(step, fullgraph=True, backend="eager")(torch.ones(3)), torch.full((3,), 2.0))
    finally:
        torch._dynamo.reset()
    assert queries == [0]
