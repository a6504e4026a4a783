import torch
import triton
import triton.language as tl

from liger_kernel.ops.dtensor_utils import PLAIN_TYPES
from liger_kernel.ops.dtensor_utils import dtensor_layout
from liger_kernel.ops.layout_utils import as_rows
from liger_kernel.ops.layout_utils import launch_shape
from liger_kernel.ops.layout_utils import own_buffer
from liger_kernel.ops.layout_utils import tile_launch
from liger_kernel.ops.layout_utils import tile_of_program
from liger_kernel.ops.layout_utils import tile_settings
from liger_kernel.ops.utils import tanh
from liger_kernel.ops.utils import tanh_from_exp


@triton.jit
def _geglu_forward_kernel(
    a_ptr,
    a_row_stride,
    b_ptr,
    b_row_stride,
    y_ptr,
    n_rows,
    n_cols,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    WALK_ROWS: tl.constexpr,
    WHOLE_TILES: tl.constexpr,
):
    row_start, col_start, tile_rows, cols, _, mask = tile_of_program(
        tl.program_id(0), n_rows, n_cols, BLOCK_ROWS, BLOCK_COLS, WALK_ROWS, WHOLE_TILES
    )
    a_ptr += row_start * a_row_stride + col_start
    b_ptr += row_start * b_row_stride + col_start
    y_ptr += row_start * n_cols + col_start
    # fp32 math (tanh: precision-sensitive in bf16/fp16), each op's result rounded to the inputs' dtype as eager
    # PyTorch rounds it.
    a = tl.load(a_ptr + (tile_rows * a_row_stride + cols[None, :]), mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + (tile_rows * b_row_stride + cols[None, :]), mask=mask, other=0.0).to(tl.float32)
    input_dtype = a_ptr.dtype.element_ty
    sqrt_2_over_pi = 0.7978845608028654
    y = b * (0.5 * a * (tanh(sqrt_2_over_pi * (0.044715 * a * a * a + a)) + 1.0)).to(input_dtype).to(tl.float32)
    tl.store(y_ptr + (tile_rows * n_cols + cols[None, :]), y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _geglu_backward_kernel(
    grad_y_ptr,
    grad_y_row_stride,
    a_ptr,
    a_row_stride,
    b_ptr,
    b_row_stride,
    grad_a_ptr,
    grad_b_ptr,
    n_rows,
    n_cols,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    WALK_ROWS: tl.constexpr,
    WHOLE_TILES: tl.constexpr,
):
    row_start, col_start, tile_rows, cols, _, mask = tile_of_program(
        tl.program_id(0), n_rows, n_cols, BLOCK_ROWS, BLOCK_COLS, WALK_ROWS, WHOLE_TILES
    )
    grad_y_ptr += row_start * grad_y_row_stride + col_start
    a_ptr += row_start * a_row_stride + col_start
    b_ptr += row_start * b_row_stride + col_start
    grad_a_ptr += row_start * n_cols + col_start
    grad_b_ptr += row_start * n_cols + col_start
    grad_y = tl.load(grad_y_ptr + (tile_rows * grad_y_row_stride + cols[None, :]), mask=mask, other=0.0).to(tl.float32)
    a = tl.load(a_ptr + (tile_rows * a_row_stride + cols[None, :]), mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + (tile_rows * b_row_stride + cols[None, :]), mask=mask, other=0.0).to(tl.float32)
    # Derived from the reference by the chain rule; forward values are recomputed, not saved.
    input_dtype = a_ptr.dtype.element_ty
    sqrt_2_over_pi = 0.7978845608028654
    tanh_inner = tanh_from_exp(sqrt_2_over_pi * (0.044715 * a * a * a + a))
    half_a = 0.5 * a
    grad_a = (
        half_a * sqrt_2_over_pi * (1.0 - tanh_inner * tanh_inner) * (3 * 0.044715 * a * a + 1.0)
        + 0.5 * tanh_inner
        + 0.5
    ) * (b * grad_y).to(input_dtype).to(tl.float32)
    grad_b = grad_y * (half_a * (tanh_inner + 1.0)).to(input_dtype).to(tl.float32)
    tl.store(grad_a_ptr + (tile_rows * n_cols + cols[None, :]), grad_a.to(grad_a_ptr.dtype.element_ty), mask=mask)
    tl.store(grad_b_ptr + (tile_rows * n_cols + cols[None, :]), grad_b.to(grad_b_ptr.dtype.element_ty), mask=mask)


def geglu_forward(a, b):
    if b.shape != a.shape:
        raise ValueError(f"geglu: b has shape {tuple(b.shape)}, expected {tuple(a.shape)} like a")
    shape = a.shape
    n_cols = shape[-1]
    a = as_rows(a, n_cols)
    b = as_rows(b, n_cols)
    n_rows = a.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=a.dtype, device=a.device)
    view_rows, view_cols = launch_shape(n_rows, n_cols, a, b)
    block_rows, block_cols, num_warps = tile_settings(view_rows, view_cols, block_elements=4096, max_block_cols=2048)
    grid, tile = tile_launch(view_rows, view_cols, block_rows, block_cols, num_warps)
    _geglu_forward_kernel[grid](a, a.stride(0), b, b.stride(0), y, view_rows, view_cols, **tile)
    return a, b, y.view(*shape)


def geglu_backward(a, b, grad_y):
    shape = grad_y.shape
    n_cols = shape[-1]
    grad_y = as_rows(grad_y, n_cols)
    n_rows = grad_y.shape[0]
    # The inputs are intermediates the module made and nothing reads after this: their buffers take their gradients.
    grad_a = own_buffer(a, n_rows, n_cols)
    grad_b = own_buffer(b, n_rows, n_cols)
    view_rows, view_cols = launch_shape(n_rows, n_cols, grad_y, a, b)
    block_rows, block_cols, num_warps = tile_settings(view_rows, view_cols, block_elements=4096, max_block_cols=2048)
    # Twice the forward's warps on its tile: the backward loads a tensor more and does more math per element.
    grid, tile = tile_launch(view_rows, view_cols, block_rows, block_cols, 2 * num_warps)
    _geglu_backward_kernel[grid](
        grad_y, grad_y.stride(0), a, a.stride(0), b, b.stride(0), grad_a, grad_b, view_rows, view_cols, **tile
    )
    return grad_a.view(*shape), grad_b.view(*shape)


class LigerGELUMulFunction(torch.autograd.Function):
    """y = gelu_tanh(a) * b: forward and backward in Triton."""

    @staticmethod
    def forward(ctx, a, b):
        # DTensors compute on their local shards; plain tensors, told apart by type alone, skip the layout's checks.
        ctx.layout = None if {type(a), type(b)} <= PLAIN_TYPES else dtensor_layout("geglu", {"a": a, "b": b}, {}, ())
        if ctx.layout is not None:
            a, b = ctx.layout.local((a, b), ())
        a, b, y = geglu_forward(a, b)
        ctx.save_for_backward(a, b)
        if ctx.layout is not None:
            (y,) = ctx.layout.wrap(y)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        a, b = ctx.saved_tensors
        if ctx.layout is not None:
            (grad_y,) = ctx.layout.local_grads(grad_y)
        grad_a, grad_b = geglu_backward(a, b, grad_y)
        if ctx.layout is not None:
            grad_a, grad_b = ctx.layout.wrap_grads((grad_a, grad_b), ())
        return grad_a, grad_b
