"""RMSNorm ``y = x / sqrt(mean(x^2) + eps) * (offset + w)`` as fused Triton kernels.

Models disagree about which parts of RMSNorm run in fp32, and the difference is visible in bf16 training, so
the kernels take the casting convention as a compile-time constant:

- "llama": only the reciprocal RMS is computed in fp32; ``x * rstd`` is cast back to the input dtype before
  the multiply by ``offset + w`` (HF ``LlamaRMSNorm``).
- "gemma": everything in fp32, including ``offset + w``; the result is cast once at the end (HF Gemma, which
  uses ``offset = 1`` with zero-initialised weights).
- "none": everything in the input dtype.

Without a weight (``W=None``, a norm built with ``elementwise_affine=False``) the result is just the normalised
input, in the same casting convention; ``offset`` then has nothing to shift and is ignored. Whether there is a
weight is a compile-time constant too, so the weighted kernels compile as they did before.

Forward caches the reciprocal RMS of each row, so backward never recomputes the reduction over x^2.
"""

import torch
import triton
import triton.language as tl

from liger_kernel.ops.utils import calculate_settings
from liger_kernel.ops.utils import ensure_contiguous
from liger_kernel.ops.utils import get_num_sms

_CASTING_MODE_NONE: tl.constexpr = tl.constexpr(-1)
_CASTING_MODE_LLAMA: tl.constexpr = tl.constexpr(0)
_CASTING_MODE_GEMMA: tl.constexpr = tl.constexpr(1)

_CASTING_MODES = {
    "none": _CASTING_MODE_NONE.value,
    "llama": _CASTING_MODE_LLAMA.value,
    "gemma": _CASTING_MODE_GEMMA.value,
}


@triton.jit
def _rms_norm_forward_kernel(
    Y_ptr,
    Y_row_stride,
    X_ptr,
    X_row_stride,
    W_ptr,
    RSTD_ptr,
    n_cols,
    eps,
    offset,
    casting_mode: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0)
    x_dtype = x.dtype
    if HAS_WEIGHT:
        w = tl.load(W_ptr + cols, mask=mask, other=0)

    if casting_mode == _CASTING_MODE_LLAMA:
        x = x.to(tl.float32)
    if casting_mode == _CASTING_MODE_GEMMA:
        x = x.to(tl.float32)
        if HAS_WEIGHT:
            w = w.to(tl.float32)

    # Masked lanes load 0, so they add nothing to the sum; divide by the real width, not BLOCK_SIZE.
    mean_square = tl.sum(x * x, axis=0) / n_cols
    # tl.rsqrt accepts only fp32; in "none" mode the result is rounded back so the rest stays in x's dtype.
    rstd = tl.rsqrt(mean_square.to(tl.float32) + eps).to(x.dtype)
    tl.store(RSTD_ptr + row, rstd)

    normed = x * rstd
    if HAS_WEIGHT:
        if casting_mode == _CASTING_MODE_LLAMA:
            normed = normed.to(x_dtype)
        y = normed * (offset + w)
    else:
        y = normed
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_backward_kernel(
    dY_ptr,
    dY_row_stride,
    dX_ptr,
    dX_row_stride,
    X_ptr,
    X_row_stride,
    W_ptr,
    RSTD_ptr,
    dW_partial_ptr,
    dW_partial_row_stride,
    n_rows,
    n_cols,
    offset,
    casting_mode: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    # A persistent grid (one program per SM) walks the rows with a stride of the grid size, so each program
    # keeps its share of dW in registers and writes a single partial row instead of one per input row.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    if HAS_WEIGHT:
        w = tl.load(W_ptr + cols, mask=mask, other=0)
        if casting_mode == _CASTING_MODE_NONE:
            scale = offset + w
        else:
            scale = offset + w.to(tl.float32)
        dw_acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)

    # A while loop rather than range(pid, n_rows, num_programs): Triton's CPU interpreter (with recent NumPy)
    # cannot turn runtime scalars into range bounds, and a while condition works both there and compiled.
    row = pid.to(tl.int64)
    while row < n_rows:
        dy = tl.load(dY_ptr + row * dY_row_stride + cols, mask=mask, other=0)
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0)
        x_dtype = x.dtype
        rstd = tl.load(RSTD_ptr + row)

        if casting_mode == _CASTING_MODE_NONE:
            normed = x * rstd
            if HAS_WEIGHT:
                dnormed = dy * scale.to(x_dtype)
            else:
                dnormed = dy
        else:
            x = x.to(tl.float32)
            normed = x * rstd
            if HAS_WEIGHT:
                dnormed = dy.to(tl.float32) * scale
            else:
                dnormed = dy.to(tl.float32)

        # normed = x * rstd with rstd = mean(x^2)^(-1/2):  dx = rstd * (dnormed - normed * mean(dnormed * normed))
        correction = tl.sum(dnormed * normed, axis=0) / n_cols
        dx = rstd * (dnormed - normed * correction)
        tl.store(dX_ptr + row * dX_row_stride + cols, dx.to(dX_ptr.dtype.element_ty), mask=mask)

        if HAS_WEIGHT:
            # dW sees the normalised input exactly as forward multiplied it, including llama's rounding to x's dtype.
            if casting_mode == _CASTING_MODE_LLAMA:
                normed = normed.to(x_dtype)
            dw_acc += dy.to(tl.float32) * normed.to(tl.float32)
        row += num_programs

    if HAS_WEIGHT:
        tl.store(dW_partial_ptr + pid * dW_partial_row_stride + cols, dw_acc, mask=mask)


def _casting_mode_id(casting_mode: str | int) -> int:
    if isinstance(casting_mode, int):
        if casting_mode not in _CASTING_MODES.values():
            raise ValueError(
                f"Invalid casting mode id {casting_mode}; expected one of {sorted(_CASTING_MODES.values())}"
            )
        return casting_mode
    if casting_mode not in _CASTING_MODES:
        raise ValueError(f"Invalid casting mode {casting_mode!r}; expected one of {sorted(_CASTING_MODES)}")
    return _CASTING_MODES[casting_mode]


def rms_norm_forward(
    X: torch.Tensor,
    W: torch.Tensor | None,
    eps: float,
    offset: float,
    casting_mode: str | int,
    row_mode: bool | None = None,
):
    """Return ``(Y, X, RSTD, BLOCK_SIZE, num_warps, casting_mode)``; X comes back as the 2-D view used.

    ``W=None`` normalises without a weight. ``row_mode`` is accepted for compatibility with callers that choose
    between a one-row-per-program and a multi-row kernel: these kernels always give each row its own program
    (forward) or walk rows one at a time (backward), so every value gives the same result and speed.
    """
    casting_mode = _casting_mode_id(casting_mode)
    shape = X.shape
    n_cols = shape[-1]
    if W is not None and W.shape != (n_cols,):
        raise ValueError(f"RMSNorm weight must have shape ({n_cols},), got {tuple(W.shape)}")
    X = X.view(-1, n_cols)
    n_rows = X.shape[0]
    block_size, num_warps = calculate_settings(n_cols)

    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    # "none" keeps rstd in the input dtype like the rest of its arithmetic; the other modes need it in fp32.
    rstd_dtype = X.dtype if casting_mode == _CASTING_MODE_NONE.value else torch.float32
    RSTD = torch.empty(n_rows, dtype=rstd_dtype, device=X.device)

    _rms_norm_forward_kernel[(n_rows,)](
        Y,
        Y.stride(0),
        X,
        X.stride(0),
        W if W is not None else X,  # placeholder pointer, unread without HAS_WEIGHT
        RSTD,
        n_cols,
        eps,
        offset,
        casting_mode=casting_mode,
        HAS_WEIGHT=W is not None,
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )
    return Y.view(*shape), X, RSTD, block_size, num_warps, casting_mode


def rms_norm_backward(
    dY: torch.Tensor,
    X: torch.Tensor,
    W: torch.Tensor | None,
    RSTD: torch.Tensor,
    offset: float,
    casting_mode: str | int,
    BLOCK_SIZE: int,
    num_warps: int,
    in_place: bool,
    row_mode: bool | None = None,
):
    """Return ``(dX, dW)`` (``dW`` None without a weight); with ``in_place`` dX overwrites dY's buffer (the caller
    must not need dY again). ``row_mode`` changes nothing, as in ``rms_norm_forward``."""
    casting_mode = _casting_mode_id(casting_mode)
    shape = dY.shape
    n_cols = shape[-1]
    dY = dY.view(-1, n_cols)
    n_rows = dY.shape[0]

    # Each row's dX is written only after the row's dY is fully loaded by the same program, so aliasing is safe;
    # a dtype mismatch would store dX in the wrong precision, so fall back to a fresh buffer then.
    dX = dY if in_place and dY.dtype == X.dtype else torch.empty_like(X)
    num_programs = max(1, min(get_num_sms(X.device), n_rows))
    has_weight = W is not None
    if has_weight:
        dW_partial = torch.empty((num_programs, n_cols), dtype=torch.float32, device=W.device)
    else:
        dW_partial = RSTD  # placeholder pointer, never written without HAS_WEIGHT

    _rms_norm_backward_kernel[(num_programs,)](
        dY,
        dY.stride(0),
        dX,
        dX.stride(0),
        X,
        X.stride(0),
        W if has_weight else X,
        RSTD,
        dW_partial,
        dW_partial.stride(0) if has_weight else 0,
        n_rows,
        n_cols,
        offset,
        casting_mode=casting_mode,
        HAS_WEIGHT=has_weight,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )
    dW = dW_partial.sum(dim=0).to(W.dtype) if has_weight else None
    return dX.view(*shape), dW


class LigerRMSNormFunction(torch.autograd.Function):
    """Autograd wrapper: ``apply(X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None)``.

    ``W`` may be None (no elementwise affine); ``row_mode`` is accepted and has no effect (see
    ``rms_norm_forward``).
    """

    @staticmethod
    @ensure_contiguous
    def forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
        Y, X, RSTD, block_size, num_warps, casting_mode = rms_norm_forward(X, W, eps, offset, casting_mode, row_mode)
        ctx.offset = offset
        ctx.casting_mode = casting_mode
        ctx.in_place = in_place
        ctx.row_mode = row_mode
        ctx.block_size = block_size
        ctx.num_warps = num_warps
        ctx.save_for_backward(X, W, RSTD)  # W may be None; saved_tensors gives it back as None
        return Y

    @staticmethod
    @ensure_contiguous
    def backward(ctx, dY):
        X, W, RSTD = ctx.saved_tensors
        dX, dW = rms_norm_backward(
            dY, X, W, RSTD, ctx.offset, ctx.casting_mode, ctx.block_size, ctx.num_warps, ctx.in_place, ctx.row_mode
        )
        return dX, dW, None, None, None, None, None
