"""A small hand-written kernel in a style of its own, for --modify and validate tests: ``mulsig(x, gate) =
x * sigmoid(gate)`` on a flat 1-D grid (no rows), launched straight from the autograd Function (no wrappers),
gradients into fresh buffers, a store of an expression, a launch passing its constexpr block size by position,
pointers named X/G/OUT, single quotes (so the file is not ruff-formatted), a module without extra_repr and a
functional named mul_sigmoid. ``install`` writes it into a checkout."""

from pathlib import Path

OPS = '''\
"""x * sigmoid(gate), by hand: one flat 1-D grid over all the elements, no row structure."""
import torch
import triton
import triton.language as tl


@triton.jit
def _mulsig_fwd(X, G, OUT, N, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(X + offs, mask=m, other=0.0)
    g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
    # sigmoid wants fp32
    tl.store(OUT + offs, x * tl.sigmoid(g), mask=m)


@triton.jit
def _mulsig_bwd(DOUT, X, G, DX, DG, N, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    dout = tl.load(DOUT + offs, mask=m, other=0.0)
    x = tl.load(X + offs, mask=m, other=0.0)
    g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
    s = tl.sigmoid(g)
    tl.store(DX + offs, dout * s, mask=m)
    tl.store(DG + offs, dout * x * s * (1 - s), mask=m)


class _MulSigFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate):
        x = x.contiguous()
        gate = gate.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)
        _mulsig_fwd[grid](x, gate, out, n, BLOCK=256)
        ctx.save_for_backward(x, gate)
        return out

    @staticmethod
    def backward(ctx, dout):
        x, gate = ctx.saved_tensors
        dout = dout.contiguous()
        dx, dg = torch.empty_like(x), torch.empty_like(gate)
        n = x.numel()
        _mulsig_bwd[(triton.cdiv(n, 256),)](dout, x, gate, dx, dg, n, 256)
        return dx, dg
'''

MODULE = """\
import torch.nn as nn

from liger_kernel.ops.mulsig import _MulSigFn


class MulSigmoid(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, gate):
        return _MulSigFn.apply(x, gate)
"""

FUNCTIONAL = """

def mul_sigmoid(x, gate):
    return _MulSigFn.apply(x, gate)
"""

TEST = """\
import pytest
import torch

from liger_kernel.transformers.functional import mul_sigmoid
from liger_kernel.transformers.mulsig import MulSigmoid


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_mul_sigmoid_matches_torch(n):
    x = torch.randn(n, requires_grad=True)
    g = torch.randn(n, requires_grad=True)
    out = mul_sigmoid(x, g)
    ref = x * torch.sigmoid(g)
    torch.testing.assert_close(out, ref)
    (gx, gg) = torch.autograd.grad(out.sum(), (x, g))
    (rx, rg) = torch.autograd.grad(ref.sum(), (x, g))
    torch.testing.assert_close(gx, rx)
    torch.testing.assert_close(gg, rg)


def test_module_has_no_parameters():
    assert list(MulSigmoid().parameters()) == []
"""


def install(root: Path, ops: str = OPS) -> None:
    (root / "src/liger_kernel/ops/mulsig.py").write_text(ops)
    (root / "src/liger_kernel/transformers/mulsig.py").write_text(MODULE)
    functional = root / "src/liger_kernel/transformers/functional.py"
    text = functional.read_text()
    anchor = "from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction\n"
    text = text.replace(anchor, anchor + "from liger_kernel.ops.mulsig import _MulSigFn\n")
    functional.write_text(text + FUNCTIONAL)
    (root / "test/transformers/test_mulsig.py").write_text(TEST)
