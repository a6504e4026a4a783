"""Session 46 probe: does a plain tier-1 launch (upstream's shape, no layout_utils) keep the tile walk's speed?

geglu forward and backward, bf16, 16384 rows x {4096, 8192, 14336}, GPU time of each launch captured in a CUDA graph
(`triton.testing.do_bench_cudagraph`, median of 5 rounds), in one process:
  tile walk    geglu_tile_walk.py: the generated ops/geglu.py before session 46 (layout_utils' tile_of_program,
               contiguous tensors as one row of 2048-element tiles, forward 4 warps, backward 8)
  row blocks   the generated ops/geglu.py of the checkout (ops_tier1_rows.py.j2), when it is the row-block one
  upstream     liger-kernel 0.8.5's ops/geglu.py (one row a program, calculate_settings)
  row          the generated math, one row a program, calculate_settings (upstream's launch)
  2d-B-wW      the generated math, grid (rows, column tiles of B), W warps (upstream swiglu's Blackwell launch)
and the device-to-device copy rate. Run in .gpu-run with PYTHONPATH=src:. and upstream 0.8.5 under /tmp/up:
    python3 plain_tier1_probe.py /tmp/up HELPER_DIR [SIZE ...]
"""

import statistics
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, sys.argv[2])
from upstream_liger import load_upstream  # noqa: E402

up = load_upstream(sys.argv[1], modules=("ops.geglu",))

import importlib.util  # noqa: E402
import pathlib  # noqa: E402

from liger_kernel.ops import geglu as checkout_geglu  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "geglu_tile_walk", pathlib.Path(__file__).with_name("geglu_tile_walk.py")
)
generated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generated)
from liger_kernel.ops.utils import calculate_settings  # noqa: E402
from liger_kernel.ops.utils import tanh  # noqa: E402
from liger_kernel.ops.utils import tanh_from_exp  # noqa: E402

SQRT_2_OVER_PI = 0.7978845608028654


@triton.jit
def _forward(a_ptr, b_ptr, y_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    gelu = 0.5 * a * (tanh(0.7978845608028654 * (0.044715 * a * a * a + a)) + 1.0)
    y = b * gelu.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _backward(dy_ptr, a_ptr, b_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    t = tanh_from_exp(0.7978845608028654 * (0.044715 * a * a * a + a))
    half_a = 0.5 * a
    da = (half_a * 0.7978845608028654 * (1.0 - t * t) * (3 * 0.044715 * a * a + 1.0) + 0.5 * t + 0.5) * (b * dy).to(
        a_ptr.dtype.element_ty
    ).to(tl.float32)
    db = dy * (half_a * (t + 1.0)).to(a_ptr.dtype.element_ty).to(tl.float32)
    tl.store(a_ptr + row * stride + cols, da.to(a_ptr.dtype.element_ty), mask=mask)
    tl.store(b_ptr + row * stride + cols, db.to(b_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _forward_1d(a_ptr, b_ptr, y_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    program = tl.program_id(0).to(tl.int64)
    n_blocks = tl.cdiv(n_cols, BLOCK_SIZE)
    row = program // n_blocks
    cols = (program % n_blocks) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    gelu = 0.5 * a * (tanh(0.7978845608028654 * (0.044715 * a * a * a + a)) + 1.0)
    y = b * gelu.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _backward_1d(dy_ptr, a_ptr, b_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    program = tl.program_id(0).to(tl.int64)
    n_blocks = tl.cdiv(n_cols, BLOCK_SIZE)
    row = program // n_blocks
    cols = (program % n_blocks) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    t = tanh_from_exp(0.7978845608028654 * (0.044715 * a * a * a + a))
    half_a = 0.5 * a
    da = (half_a * 0.7978845608028654 * (1.0 - t * t) * (3 * 0.044715 * a * a + 1.0) + 0.5 * t + 0.5) * (b * dy).to(
        a_ptr.dtype.element_ty
    ).to(tl.float32)
    db = dy * (half_a * (t + 1.0)).to(a_ptr.dtype.element_ty).to(tl.float32)
    tl.store(a_ptr + row * stride + cols, da.to(a_ptr.dtype.element_ty), mask=mask)
    tl.store(b_ptr + row * stride + cols, db.to(b_ptr.dtype.element_ty), mask=mask)


def one_d(block, warps, flat):
    """A 1-D grid, each program a column block of one row (a division finds it); ``flat``: the tensors as one row."""

    def shape(a):
        return (1, a.numel()) if flat else a.shape

    def forward(a, b):
        y = torch.empty_like(a)
        n_rows, n_cols = shape(a)
        grid = (n_rows * triton.cdiv(n_cols, block),)
        _forward_1d[grid](a, b, y, n_cols, n_cols, BLOCK_SIZE=block, num_warps=warps)
        return y

    def backward(a, b, dy):
        n_rows, n_cols = shape(a)
        grid = (n_rows * triton.cdiv(n_cols, block),)
        _backward_1d[grid](dy, a, b, n_cols, n_cols, BLOCK_SIZE=block, num_warps=warps)
        return a, b

    return forward, backward


def plain(block, warps):
    def forward(a, b):
        y = torch.empty_like(a)
        n_rows, n_cols = a.shape
        bs, nw = (calculate_settings(n_cols)) if block is None else (block, warps)
        _forward[(n_rows, triton.cdiv(n_cols, bs))](a, b, y, a.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=nw)
        return y

    def backward(a, b, dy):
        n_rows, n_cols = a.shape
        bs, nw = (calculate_settings(n_cols)) if block is None else (block, warps)
        _backward[(n_rows, triton.cdiv(n_cols, bs))](dy, a, b, a.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=nw)
        return a, b

    return forward, backward


def rounds(fn, n=5):
    return statistics.median(triton.testing.do_bench_cudagraph(fn, rep=50) for _ in range(n))


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    providers = {
        "tile walk": (lambda a, b: generated.geglu_forward(a, b)[2], generated.geglu_backward),
        "row blocks": (lambda a, b: checkout_geglu.geglu_forward(a, b)[2], checkout_geglu.geglu_backward),
        "upstream": (lambda a, b: up.geglu.geglu_forward(a, b)[2], lambda a, b, dy: up.geglu.geglu_backward(a, b, dy)),
        "row": plain(None, None),
    }
    # Sizes given after the two folders: those only, and the first four providers only (a short call).
    sizes = [int(s) for s in sys.argv[3:]] or [4096, 8192, 14336]
    quick = len(sys.argv) > 3
    for block in () if quick else (1024, 2048, 4096):
        for warps in (4, 8, 16):
            if block // (32 * warps) >= 4:  # at least 4 elements a thread
                providers[f"2d-{block}-w{warps}"] = plain(block, warps)
    for block, warps in () if quick else ((1024, 4), (2048, 4), (2048, 8), (4096, 8)):
        providers[f"1d-{block}-w{warps}"] = one_d(block, warps, flat=False)
        providers[f"flat-{block}-w{warps}"] = one_d(block, warps, flat=True)
    print("| H | provider | forward ms | backward ms | fwd+bwd ms | TB/s |")
    print("|---|---|---|---|---|---|")
    for n_cols in sizes:
        a = torch.randn(16384, n_cols, device="cuda", dtype=torch.bfloat16)
        b = torch.randn_like(a)
        dy = torch.randn_like(a)
        copy_ms = rounds(lambda: a.clone())
        print(f"| {n_cols} | copy | {copy_ms:.4f} | | | {2 * a.nbytes / copy_ms / 1e9:.2f} |")
        ref_y = providers["tile walk"][0](a, b)
        for name, (forward, backward) in providers.items():
            y = forward(a, b)
            same = torch.equal(y, ref_y)
            a2, b2 = a.clone(), b.clone()
            fwd = rounds(lambda: forward(a, b))
            bwd = rounds(lambda: backward(a2, b2, dy))
            tbs = 8 * a.nbytes / (fwd + bwd) / 1e9
            note = "" if same else " (forward differs from the tile walk's)"
            print(f"| {n_cols} | {name}{note} | {fwd:.4f} | {bwd:.4f} | {fwd + bwd:.4f} | {tbs:.2f} |", flush=True)


main()
