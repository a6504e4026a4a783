"""SwiGLU activation ``c = silu(a) * b`` fused into one Triton pass forward and one backward.

The backward pass recomputes ``sigmoid(a)`` instead of caching it, and writes the gradients over the inputs'
own buffers: after backward neither ``a`` nor ``b`` is needed again, so the MLP's two largest activations cost
no extra memory for their gradients.

Some models scale the gate before the activation and the product after it (Falcon-H1:
``c = silu(a * gate_multiplier) * b * down_multiplier``). Both scalars are folded into the same two passes;
the kernels take them only when one differs from 1 (a compile-time switch), so plain SwiGLU compiles as
before.
"""

import torch
import triton
import triton.language as tl

from liger_kernel.ops.utils import calculate_settings
from liger_kernel.ops.utils import ensure_contiguous


@triton.jit
def _swiglu_forward_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    row_stride,
    n_cols,
    gate_multiplier,
    down_multiplier,
    SCALED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    # int64 before the multiply: rows * stride overflows int32 for large activations (e.g. 8 x 4096 x 14336).
    row = tl.program_id(0).to(tl.int64)
    offset = row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    # sigmoid needs fp32 (Triton rejects half types, and fp32 avoids precision loss); b stays in its dtype.
    a = tl.load(a_ptr + offset + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + offset + cols, mask=mask, other=0)
    if SCALED:
        a = a * gate_multiplier
    c = (a * tl.sigmoid(a)).cast(b.dtype) * b
    if SCALED:
        c = c * down_multiplier
    tl.store(c_ptr + offset + cols, c.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_backward_kernel(
    dc_ptr,
    a_ptr,
    b_ptr,
    row_stride,
    n_cols,
    gate_multiplier,
    down_multiplier,
    SCALED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offset = row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    dc = tl.load(dc_ptr + offset + cols, mask=mask, other=0).to(tl.float32)
    a = tl.load(a_ptr + offset + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + offset + cols, mask=mask, other=0).to(tl.float32)
    if SCALED:
        # c = silu(g * a) * b * d: the incoming gradient carries d, and d/da of silu(g * a) carries g.
        dc = dc * down_multiplier
        a = a * gate_multiplier

    sig = tl.sigmoid(a)
    silu = a * sig
    # d silu(a) / da = sig + a * sig * (1 - sig) = sig * (1 + a * (1 - sig))
    da = dc * b * sig * (1.0 + a * (1.0 - sig))
    if SCALED:
        da = da * gate_multiplier
    db = dc * silu

    # Both rows are fully loaded above, so overwriting them now is safe.
    tl.store(a_ptr + offset + cols, da.to(a_ptr.dtype.element_ty), mask=mask)
    tl.store(b_ptr + offset + cols, db.to(b_ptr.dtype.element_ty), mask=mask)


def _is_scaled(gate_multiplier: float, down_multiplier: float) -> bool:
    return gate_multiplier != 1.0 or down_multiplier != 1.0


def swiglu_forward(
    a: torch.Tensor, b: torch.Tensor, gate_multiplier: float = 1.0, down_multiplier: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(a, b, c)`` with ``c = silu(a * gate_multiplier) * b * down_multiplier``.

    ``a`` and ``b`` come back as the 2-D views saved for backward.
    """
    if a.shape != b.shape:
        raise ValueError(f"swiglu expects a and b of the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    original_shape = a.shape
    n_cols = original_shape[-1]
    a = a.view(-1, n_cols)
    b = b.view(-1, n_cols)
    c = torch.empty_like(a)
    n_rows = a.shape[0]

    block_size, num_warps = calculate_settings(n_cols)
    _swiglu_forward_kernel[(n_rows,)](
        a,
        b,
        c,
        c.stride(-2),
        n_cols=n_cols,
        gate_multiplier=float(gate_multiplier),
        down_multiplier=float(down_multiplier),
        SCALED=_is_scaled(gate_multiplier, down_multiplier),
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )
    return a, b, c.view(*original_shape)


def swiglu_backward(
    a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor, gate_multiplier: float = 1.0, down_multiplier: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(da, db)``, written in place over ``a`` and ``b`` (which must be contiguous 2-D rows)."""
    original_shape = dc.shape
    n_cols = original_shape[-1]
    dc = dc.view(-1, n_cols)
    n_rows = dc.shape[0]

    block_size, num_warps = calculate_settings(n_cols)
    _swiglu_backward_kernel[(n_rows,)](
        dc,
        a,
        b,
        dc.stride(-2),
        n_cols=n_cols,
        gate_multiplier=float(gate_multiplier),
        down_multiplier=float(down_multiplier),
        SCALED=_is_scaled(gate_multiplier, down_multiplier),
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )
    return a.view(*original_shape), b.view(*original_shape)


class LigerSiLUMulFunction(torch.autograd.Function):
    """``silu(a * gate_multiplier) * b * down_multiplier`` with a fused backward that reuses the buffers of ``a``
    and ``b`` for their gradients (both multipliers default to 1: plain SwiGLU).

    Because the gradients overwrite the saved inputs, backward can run only once per forward (no
    ``retain_graph`` double backward), and ``a``/``b`` must not be read by anything else after backward.
    """

    @staticmethod
    @ensure_contiguous
    def forward(ctx, a, b, gate_multiplier: float = 1.0, down_multiplier: float = 1.0):
        gate_multiplier = float(gate_multiplier)
        down_multiplier = float(down_multiplier)
        a, b, c = swiglu_forward(a, b, gate_multiplier, down_multiplier)
        ctx.gate_multiplier = gate_multiplier
        ctx.down_multiplier = down_multiplier
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    @ensure_contiguous
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        da, db = swiglu_backward(a, b, dc, ctx.gate_multiplier, ctx.down_multiplier)
        return da, db, None, None
