"""Two small hand-written kernels in upstream Liger-Kernel's style, for ``modify`` on an upstream-layout checkout.

``tanh_glu`` (tier 1, ``tanh(a) * b`` of an MLP's gate and up projections): libdevice ``tanh`` imported the way
upstream's kernels import it (the interpreter cannot run it unaided), launches with the runtime arguments by
position and the constexprs by keyword, a module whose forward the checkout's monkey patch binds to a model's own
MLP (no ``__class__`` conversion), a functional importing its Function from ``liger_kernel.ops``.

``row_softmax`` (tier 2, a softmax over the last dimension): a Function of one input whose backward returns its one
gradient bare, host wrappers with annotated parameters and a module without arguments.

Their tests are written as upstream writes its own: ``infer_device`` from ``liger_kernel.utils``, ``device`` at module
level, ``bsz, seq_len, size`` and ``dtype, atol, rtol`` parametrization. ``install`` writes both into a checkout.
"""

from pathlib import Path

from tools.kernelgen.layout import FUNCTIONAL
from tools.kernelgen.layout import MONKEY_PATCH
from tools.kernelgen.layout import OPS_INIT

TANH_GLU_OPS = """\
import torch
import triton
import triton.language as tl

from liger_kernel.ops.utils import calculate_settings
from liger_kernel.ops.utils import ensure_contiguous

try:
    from triton.language.extra.libdevice import tanh
except ModuleNotFoundError:
    from triton.language.extra.cuda.libdevice import tanh


@triton.jit
def _tanh_glu_forward_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    a += row * stride
    b += row * stride
    c += row * stride

    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a_row = tl.load(a + cols, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + cols, mask=mask, other=0)
    c_row = tanh(a_row).cast(b_row.dtype) * b_row
    tl.store(c + cols, c_row, mask=mask)


@triton.jit
def _tanh_glu_backward_kernel(dc, a, b, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    dc += row * stride
    a += row * stride
    b += row * stride

    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dc_row = tl.load(dc + cols, mask=mask, other=0).to(tl.float32)
    a_row = tl.load(a + cols, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + cols, mask=mask, other=0).to(tl.float32)

    # gradients overwrite the saved inputs: a and b are not needed after this row
    t = tanh(a_row)
    da_row = dc_row * (1 - t * t) * b_row
    db_row = dc_row * t
    tl.store(a + cols, da_row, mask=mask)
    tl.store(b + cols, db_row, mask=mask)


def tanh_glu_forward(a, b):
    ori_shape = a.shape
    n_cols = ori_shape[-1]
    a = a.view(-1, n_cols)
    b = b.view(-1, n_cols)
    c = torch.empty_like(a)
    n_rows = a.shape[0]

    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _tanh_glu_forward_kernel[(n_rows,)](
        a,
        b,
        c,
        c.stride(-2),
        n_cols=n_cols,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )
    return a, b, c.view(*ori_shape)


def tanh_glu_backward(a, b, dc):
    ori_shape = dc.shape
    n_cols = ori_shape[-1]
    dc = dc.view(-1, n_cols)
    n_rows = dc.shape[0]

    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _tanh_glu_backward_kernel[(n_rows,)](
        dc,
        a,
        b,
        dc.stride(-2),
        n_cols=n_cols,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )
    return a.view(*ori_shape), b.view(*ori_shape)


class LigerTanhGLUFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, a, b):
        a, b, c = tanh_glu_forward(a, b)
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    @ensure_contiguous
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        a, b = tanh_glu_backward(a, b, dc)
        return a, b
"""

TANH_GLU_MODULE = """\
import torch.nn as nn

from liger_kernel.ops import LigerTanhGLUFunction


class LigerTanhGLUMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(LigerTanhGLUFunction.apply(self.gate_proj(x), self.up_proj(x)))
"""

TANH_GLU_TEST = """\
import pytest
import torch

from test.utils import supports_bfloat16

from liger_kernel.transformers.functional import liger_tanh_glu
from liger_kernel.utils import infer_device

device = infer_device()


@pytest.mark.parametrize(
    "bsz, seq_len, size",
    [
        (2, 2, 8),
        (3, 7, 41),
    ],
)
@pytest.mark.parametrize(
    "dtype, atol, rtol",
    [
        (torch.float32, 1e-5, 1e-5),
        pytest.param(
            torch.bfloat16,
            1e-2,
            1e-2,
            marks=pytest.mark.skipif(not supports_bfloat16(), reason="bfloat16 not supported on this device"),
        ),
    ],
)
def test_correctness_functional(bsz, seq_len, size, dtype, atol, rtol):
    a = torch.randn(bsz, seq_len, size, device=device, dtype=dtype)
    b = torch.randn(bsz, seq_len, size, device=device, dtype=dtype)
    a1, b1 = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    a2, b2 = a.clone().requires_grad_(True), b.clone().requires_grad_(True)

    y1 = liger_tanh_glu(a1, b1)
    y2 = torch.tanh(a2) * b2
    assert torch.allclose(y1, y2, atol=atol, rtol=rtol)

    grad = torch.randn_like(y2)
    y1.backward(grad)
    y2.backward(grad)
    assert torch.allclose(a1.grad, a2.grad, atol=atol, rtol=rtol)
    assert torch.allclose(b1.grad, b2.grad, atol=atol, rtol=rtol)
"""

ROW_SOFTMAX_OPS = """\
from typing import Tuple

import torch
import triton
import triton.language as tl

from liger_kernel.ops.utils import calculate_settings
from liger_kernel.ops.utils import ensure_contiguous


@triton.jit
def _row_softmax_forward_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    shifted = tl.exp(x - tl.max(x, axis=0))
    y = shifted / tl.sum(shifted, axis=0)
    tl.store(Y_ptr + row * Y_row_stride + cols, y, mask=mask)


@triton.jit
def _row_softmax_backward_kernel(
    dY_ptr, dY_row_stride, Y_ptr, Y_row_stride, dX_ptr, dX_row_stride, n_cols, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    dy = tl.load(dY_ptr + row * dY_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(Y_ptr + row * Y_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dX_ptr + row * dX_row_stride + cols, dx, mask=mask)


def row_softmax_forward(x: torch.Tensor) -> Tuple[torch.Tensor, int, int]:
    *batch, n_cols = x.shape
    x2d = x.view(-1, n_cols)
    y2d = torch.empty_like(x2d)
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _row_softmax_forward_kernel[(x2d.shape[0],)](
        y2d, y2d.stride(0), x2d, x2d.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps
    )
    return y2d.view(*batch, n_cols), BLOCK_SIZE, num_warps


def row_softmax_backward(dy: torch.Tensor, y: torch.Tensor, BLOCK_SIZE: int, num_warps: int) -> torch.Tensor:
    *batch, n_cols = dy.shape
    dy2d = dy.view(-1, n_cols)
    y2d = y.view(-1, n_cols)
    dx2d = torch.empty_like(dy2d)
    _row_softmax_backward_kernel[(dy2d.shape[0],)](
        dy2d,
        dy2d.stride(0),
        y2d,
        y2d.stride(0),
        dx2d,
        dx2d.stride(0),
        n_cols,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )
    return dx2d.view(*batch, n_cols)


class LigerRowSoftmaxFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, x: torch.Tensor):
        y, BLOCK_SIZE, num_warps = row_softmax_forward(x)
        ctx.save_for_backward(y)
        ctx.BLOCK_SIZE = BLOCK_SIZE
        ctx.num_warps = num_warps
        return y

    @staticmethod
    @ensure_contiguous
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        dx = row_softmax_backward(dy, y, ctx.BLOCK_SIZE, ctx.num_warps)
        return dx
"""

ROW_SOFTMAX_MODULE = """\
import torch
import torch.nn as nn

from liger_kernel.ops import LigerRowSoftmaxFunction


class LigerRowSoftmax(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return LigerRowSoftmaxFunction.apply(x)
"""

ROW_SOFTMAX_TEST = """\
import pytest
import torch

from test.utils import supports_bfloat16

from liger_kernel.transformers.row_softmax import LigerRowSoftmax
from liger_kernel.utils import infer_device

device = infer_device()


@pytest.mark.parametrize("shape", [(2, 8), (3, 7, 256), (1, 1023)])
@pytest.mark.parametrize(
    "dtype, atol, rtol",
    [
        (torch.float32, 1e-5, 1e-5),
        pytest.param(
            torch.bfloat16,
            5e-2,
            5e-2,
            marks=pytest.mark.skipif(not supports_bfloat16(), reason="bfloat16 not supported on this device"),
        ),
    ],
)
def test_liger_row_softmax(shape, dtype, atol, rtol):
    x = torch.randn(*shape, dtype=dtype, device=device)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)

    y1 = LigerRowSoftmax()(x1)
    y2 = torch.softmax(x2, dim=-1)
    assert torch.allclose(y1, y2, atol=atol, rtol=rtol)

    dy = torch.randn_like(y2)
    y1.backward(dy)
    y2.backward(dy)
    assert torch.allclose(x1.grad, x2.grad, atol=atol, rtol=rtol)
"""

FUNCTIONALS = """

def liger_tanh_glu(a, b):
    return LigerTanhGLUFunction.apply(a, b)


def liger_row_softmax(x):
    return LigerRowSoftmaxFunction.apply(x)
"""

# Instance patching as upstream does it: the Liger forward bound to the model's own MLP object.
PATCH = """

def _patch_tanh_glu_module(module):
    module.forward = types.MethodType(LigerTanhGLUMLP.forward, module)
"""


def install(root: Path) -> None:
    """Both kernels, their registrations, their tests and the monkey-patch helper, written into ``root``."""
    ops, transformers = root / "src/liger_kernel/ops", root / "src/liger_kernel/transformers"
    (ops / "tanh_glu.py").write_text(TANH_GLU_OPS)
    (ops / "row_softmax.py").write_text(ROW_SOFTMAX_OPS)
    (transformers / "tanh_glu.py").write_text(TANH_GLU_MODULE)
    (transformers / "row_softmax.py").write_text(ROW_SOFTMAX_MODULE)
    (root / "test/transformers/test_tanh_glu.py").write_text(TANH_GLU_TEST)
    (root / "test/transformers/test_row_softmax.py").write_text(ROW_SOFTMAX_TEST)
    ops_init = root / OPS_INIT
    ops_init.write_text(
        ops_init.read_text()
        + "from liger_kernel.ops.row_softmax import LigerRowSoftmaxFunction  # noqa: F401\n"
        + "from liger_kernel.ops.tanh_glu import LigerTanhGLUFunction  # noqa: F401\n"
    )
    functional = root / FUNCTIONAL
    text = functional.read_text()
    anchor = "from liger_kernel.ops import LigerCrossEntropyFunction\n"
    assert anchor in text, "an upstream-layout functional.py imports its Functions from liger_kernel.ops"
    imports = (
        "from liger_kernel.ops import LigerRowSoftmaxFunction\nfrom liger_kernel.ops import LigerTanhGLUFunction\n"
    )
    functional.write_text(text.replace(anchor, anchor + imports) + FUNCTIONALS)
    patch = root / MONKEY_PATCH
    text = patch.read_text().replace("import logging\n", "import logging\nimport types\n", 1)
    anchor = "from liger_kernel.transformers.swiglu import LigerSwiGLUMLP\n"
    text = text.replace(anchor, anchor + "from liger_kernel.transformers.tanh_glu import LigerTanhGLUMLP\n", 1)
    patch.write_text(text + PATCH)
