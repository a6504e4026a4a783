"""Helpers shared by the Triton kernels in ``liger_kernel.ops``."""

import functools
import importlib
import os

from typing import Callable

import torch
import triton
import triton.language as tl

from packaging.version import Version

# Largest block one program may hold in registers: 64K elements of fp32 (Triton's own cap is 1M elements,
# but beyond 64K the register file spills and the fused kernels stop paying off).
MAX_FUSED_SIZE = 65536


def is_triton_interpreter() -> bool:
    """True when Triton kernels run on the CPU under Triton's interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def next_power_of_2(n: int) -> int:
    """The least power of 2 that is at least ``n`` (1 for ``n <= 1``): ``triton.next_power_of_2`` for host integers,
    a plain function, cheaper to call on the host than a ConstexprFunction."""
    return 1 << max(n - 1, 0).bit_length()


def own_buffer(x: torch.Tensor, n_rows: int, n_cols: int) -> torch.Tensor:
    """``x``'s own buffer for its gradient ([n_rows, n_cols] rows of it) when it is contiguous: a kernel that reads
    each tile of ``x`` before it writes the tile's gradient needs no other; a strided view's buffer holds more than
    ``x``, and under torch.compile the compiler plans the graph's buffers (a graph that writes its inputs is not
    captured as a CUDA graph)."""
    if x.is_contiguous() and not torch.compiler.is_compiling():
        return x
    return torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)


def scale_by_grad_output(grad, grad_output):
    """``grad``, stored by a forward for a grad_output of 1, times ``grad_output`` in place on the device (one scalar,
    or one value per row of ``grad``'s last dim); returns ``grad``."""
    rows = grad.view(-1, grad.shape[-1])
    if rows.numel() == 0:
        return grad
    grad_output = grad_output.reshape(-1).contiguous()
    block_size = min(4096, 1 << (rows.shape[1] - 1).bit_length())
    # At most 1024 programs, each walking rows: when grad_output is 1 they return at once, where one program a row
    # would launch as many as the vocabulary has classes (d(weight) of a fused linear loss).
    scale_by_grad_output_kernel[(min(rows.shape[0], 1024),)](
        rows,
        rows.stride(0),
        grad_output,
        rows.shape[0],
        rows.shape[1],
        PER_ROW=grad_output.numel() != 1,
        BLOCK_SIZE=block_size,
        num_warps=8 if block_size >= 2048 else 4,
    )
    return grad


@triton.jit
def scale_by_grad_output_kernel(
    grad_ptr,
    grad_row_stride,
    grad_output_ptr,
    n_rows,
    n_cols: tl.constexpr,
    PER_ROW: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    # Rows program_id, program_id + num_programs, ... of a gradient the forward stored for a grad_output of 1, times
    # the real grad_output in place: one scalar, or one value a row (PER_ROW). A loss that is the last op gets a
    # scalar of exactly 1: every program returns at once, with no pass over the gradient and no host sync.
    if not PER_ROW:
        if tl.load(grad_output_ptr).to(tl.float32) == 1.0:
            return
    row = tl.program_id(0).to(tl.int64)
    # A while loop: Triton's CPU interpreter takes no runtime bound in range().
    while row < n_rows:
        if PER_ROW:
            scale = tl.load(grad_output_ptr + row).to(tl.float32)
        else:
            scale = tl.load(grad_output_ptr).to(tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
            grad = tl.load(grad_ptr + row * grad_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(grad_ptr + row * grad_row_stride + cols, (grad * scale).to(grad_ptr.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


def is_hip() -> bool:
    """True on AMD GPUs, where torch is built on ROCm/HIP instead of CUDA."""
    return torch.version.hip is not None


def ensure_contiguous(fn: Callable) -> Callable:
    """Make every tensor argument of an autograd ``forward``/``backward`` contiguous before the call."""

    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        def maybe_to_contiguous(x):
            return x.contiguous() if isinstance(x, torch.Tensor) else x

        args = [maybe_to_contiguous(arg) for arg in args]
        kwargs = {key: maybe_to_contiguous(value) for key, value in kwargs.items()}
        return fn(ctx, *args, **kwargs)

    return wrapper


def calculate_settings(n: int) -> tuple[int, int]:
    """Block size (next power of two of ``n``) and warp count for a kernel that holds one row of ``n``."""
    block_size = next_power_of_2(n)
    if block_size > MAX_FUSED_SIZE:
        raise RuntimeError(
            f"Cannot launch Triton kernel since n = {n} exceeds the maximum fused block size "
            f"{MAX_FUSED_SIZE}; split the row or use a chunked kernel."
        )
    num_warps = 4
    if block_size >= 32768:
        num_warps = 32
    elif block_size >= 8192:
        num_warps = 16
    elif block_size >= 2048:
        num_warps = 8
    return block_size, num_warps


def ceil_div(n: int, d: int) -> int:
    """``triton.cdiv`` for host integers: a plain function, cheaper to call on the host than a ConstexprFunction."""
    return -(-n // d)


def compare_version(package: str, op: Callable, target: str) -> bool:
    """``compare_version("triton", operator.ge, "3.0.0")``: False when the package is not installed."""
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return False
    return op(Version(Version(pkg.__version__).base_version), Version(target))


def get_num_sms(device: torch.device | str | None = None) -> int:
    """Streaming multiprocessors of the current accelerator (a small stand-in on the CPU)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device or torch.cuda.current_device()).multi_processor_count
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return torch.xpu.get_device_properties(device or torch.xpu.current_device()).gpu_subslice_count
    # Under the interpreter every program runs serially: a few partial sums keep the reduction path tested.
    return 4


_TORCH_TO_TRITON_DTYPE = {
    torch.float32: tl.float32,
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
}


def torch_to_triton_dtype(dtype: torch.dtype):
    """The ``tl`` dtype matching a floating torch dtype (KeyError for anything else)."""
    return _TORCH_TO_TRITON_DTYPE[dtype]


@triton.jit
def element_mul_kernel(X_ptr, X_stride, grad_output_ptr, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Scale row ``program_id`` of X in place by the scalar at ``grad_output_ptr``.

    Kernels that compute their gradient in the forward pass (cross entropy) store it unscaled; backward then
    multiplies by the incoming scalar gradient without another allocation.
    """
    row = tl.program_id(0).to(tl.int64)
    X_ptr += row * X_stride
    grad_output = tl.load(grad_output_ptr)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X_ptr + cols, mask=mask)
        tl.store(X_ptr + cols, x * grad_output, mask=mask)


@triton.jit
def log1p_unit(v):
    # log(1 + v) for v in [0, 1] (softplus's exp(-|u|)) as v * p(v), p a degree-8 polynomial fitted to log1p(v) / v
    # (minimax relative error, 3e-8): within 2 ulps of log1p over [0, 1], exact at 0, and keeps the digits of a
    # small v that 1 + v would round away. Nine FMAs, fewer instructions than tl.log's range reduction and polynomial.
    p = 0.005232689902186394 * v - 0.029505223035812378
    p = p * v + 0.07822593301534653
    p = p * v - 0.13663244247436523
    p = p * v + 0.19106006622314453
    p = p * v - 0.2484298199415207
    p = p * v + 0.3331909775733948
    p = p * v - 0.4999949336051941
    p = p * v + 0.9999999403953552
    return p * v


@triton.jit
def tanh_from_exp(x):
    # tanh from one exponential: an odd Taylor polynomial near 0 (where 1 - exp(-2|x|) would cancel; below
    # |x| = 0.1 the first term left out, 62 x^9 / 2835, is under 3e-10 of tanh) and the overflow-free exponential
    # form elsewhere. Kernels with other transcendentals call it instead of libdevice's tanh, which takes registers
    # they need.
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    e = tl.exp(-2.0 * tl.abs(x))
    magnitude = (1.0 - e) / (1.0 + e)
    return tl.where(tl.abs(x) < 0.1, series, tl.where(x < 0.0, -magnitude, magnitude))


@triton.jit
def widen_to_fp32(x):
    # A value as loaded (its storage dtype) in fp32. bf16 is the upper half of an fp32, so it widens exactly by
    # bits; a kernel holding a row through a reduction widens it again after the reduction with this, which the
    # compiler cannot merge with the conversion before it, so the row stays held in 16-bit registers. Other
    # dtypes convert as usual.
    if x.dtype == tl.bfloat16:
        widened = (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    else:
        widened = x.to(tl.float32)
    return widened


# libdevice math is compiled to PTX intrinsics and does not exist under the interpreter (``libdevice.tanh`` is
# ``None`` there), so kernels import these names instead and get a formula built from core ``tl`` ops on the CPU.
if is_triton_interpreter():

    @triton.jit
    def erfc(x):
        # 1 - erf(x) without the cancellation that leaves 1 - erf(x) zero from x = 4 on: Chebyshev's fit of erfc(|x|)
        # as t * exp(-x^2 + P(t)), t = 1 / (1 + |x| / 2) (relative error under 1.2e-7 everywhere), and 2 - erfc(-x)
        # below 0.
        z = tl.abs(x)
        t = 1.0 / (1.0 + 0.5 * z)
        p = -0.82215223 + t * 0.17087277
        p = 1.48851587 + t * p
        p = -1.13520398 + t * p
        p = 0.27886807 + t * p
        p = -0.18628806 + t * p
        p = 0.09678418 + t * p
        p = 0.37409196 + t * p
        p = 1.00002368 + t * p
        p = -1.26551223 + t * p
        tail = t * tl.exp(-z * z + p)
        return tl.where(x < 0.0, 2.0 - tail, tail)

    @triton.jit
    def expm1(x):
        # exp(x) - 1 keeping the digits of a small x: Kahan's (u - 1) * x / log(u) with u = exp(x) cancels u's
        # rounding error below |x| = 1 (u == 1 gives x itself); beyond it exp(x) - 1 loses under an ulp.
        u = tl.exp(x)
        near_zero = u == 1.0
        small = (u - 1.0) * x / tl.log(tl.where(near_zero | (tl.abs(x) >= 1.0), 2.0, u))
        return tl.where(tl.abs(x) >= 1.0, u - 1.0, tl.where(near_zero, x, small))

    @triton.jit
    def log1p(x):
        # log(1 + x) keeping the digits of a small x that 1 + x rounds away: log(u) * x / (u - 1) with u = 1 + x
        # cancels u's rounding error (Goldberg), u == 1 gives x itself and u == inf gives inf.
        u = 1.0 + x
        exact = (u == 1.0) | (u == float("inf"))
        return tl.where(exact, tl.where(u == 1.0, x, u), tl.log(u) * x / tl.where(exact, 1.0, u - 1.0))

    @triton.jit
    def pow(x, y):
        # |x| ** y by exp2/log2; a negative base keeps its sign for an odd integer exponent and gives NaN for a
        # fractional one, and anything ** 0 is 1, as in torch (and libdevice).
        magnitude = tl.exp2(y * tl.log2(tl.abs(x)))
        whole = y == tl.floor(y)
        odd = whole & (y - 2.0 * tl.floor(0.5 * y) == 1.0)
        signed = tl.where(odd, -magnitude, magnitude)
        negative = tl.where(whole, signed, float("nan"))
        return tl.where(y == 0.0, 1.0, tl.where(x < 0.0, negative, magnitude))

    @triton.jit
    def tanh(x):
        # tanh(|x|) = -m / (2 + m) with m = expm1(-2|x|), which neither overflows nor, unlike 2 * sigmoid(2x) - 1,
        # loses relative precision near 0 (that form is off by ~1e-5 relative at |x| = 0.01). expm1 is Kahan's
        # exp(y) - 1 = (u - 1) * y / log(u) with u = exp(y), accurate to a few ulps; y is clamped at -60, where
        # tanh is 1 in fp32 anyway, so u never underflows to 0, and u == 1 (y ~ 0) gives m = y.
        y = tl.maximum(-2.0 * tl.abs(x), -60.0)
        u = tl.exp(y)
        near_zero = u == 1.0
        m = tl.where(near_zero, y, (u - 1.0) * y / tl.where(near_zero, 1.0, tl.log(u)))
        t = -m / (2.0 + m)
        return tl.where(x < 0, -t, t)

else:
    try:
        from triton.language.extra import libdevice
    except ImportError:  # Triton < 3.0 ships libdevice under the CUDA namespace
        from triton.language.extra.cuda import libdevice

    erfc = libdevice.erfc
    expm1 = libdevice.expm1
    log1p = libdevice.log1p
    pow = libdevice.pow
    tanh = libdevice.tanh


__all__ = [
    "MAX_FUSED_SIZE",
    "calculate_settings",
    "ceil_div",
    "compare_version",
    "element_mul_kernel",
    "ensure_contiguous",
    "erfc",
    "expm1",
    "get_num_sms",
    "is_hip",
    "is_triton_interpreter",
    "log1p",
    "log1p_unit",
    "next_power_of_2",
    "pow",
    "scale_by_grad_output",
    "scale_by_grad_output_kernel",
    "tanh",
    "tanh_from_exp",
    "torch_to_triton_dtype",
    "widen_to_fp32",
]
