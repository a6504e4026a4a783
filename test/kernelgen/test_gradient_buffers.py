"""Generated row kernels write the input's gradient over the output gradient's buffer exactly where autograd alone
holds that buffer (upstream Liger's in-place RMSNorm saving, one [rows, columns] tensor at peak), for norms written
in several styles, and leave every gradient someone else can still read intact: one passed to ``backward``, one an
add also hands to a residual branch, one a view's base shares with another branch."""

import textwrap

import pytest
import torch

from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import import_generated_ops
from test.transformers import test_layout_utils
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

STYLES = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class OffsetRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(hidden_size))
            self.eps = eps

        def forward(self, x):
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return (h * (1 + self.weight.float())).to(x.dtype)


    def weightless_rms_norm(x, eps: float = 1e-6):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)


    class MeanSquareLayerNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.bias = nn.Parameter(torch.zeros(hidden_size))
            self.eps = eps

        def forward(self, x):
            centered = x - x.mean(-1, keepdim=True)
            variance = (centered**2).mean(-1, keepdim=True)
            return centered / torch.sqrt(variance + self.eps) * self.weight + self.bias
    """
)
# A one-rank gloo mesh for the DTensor case (the shared module's tests' fixture).
one_rank_mesh = test_layout_utils.one_rank_mesh
# Built-in references too: Llama's RMSNorm (its profile asks for the reuse) and a norm with two outputs.
KERNELS = ["OffsetRMSNorm", "weightless_rms_norm", "MeanSquareLayerNorm", "rms_norm", "fused_add_rms_norm"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("buffers") / "liger")
    (root / "styles.py").write_text(STYLES)
    kernels = {}
    for entry in KERNELS:
        reference = entry if entry in ("rms_norm", "fused_add_rms_norm") else f"{root / 'styles.py'}:{entry}"
        profile = analyze(reference, name=f"buffers_{entry.lower()}")
        assert profile.tier == 2, profile.notes.tier_reason
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
        function = getattr(import_generated_ops(root, profile.operation_name), profile.function_class_name)
        parameters = [torch.rand(16, dtype=torch.float64) + 0.5 for _ in profile.parameters]
        kernels[entry] = function, parameters, len(profile.inputs)
    return kernels


def _inputs(entry, kernels):
    function, parameters, n_inputs = kernels[entry]
    torch.manual_seed(0)
    inputs = [torch.randn(2, 3, 16, dtype=torch.float64, requires_grad=True) for _ in range(n_inputs)]
    return function, inputs, [p.clone().requires_grad_() for p in parameters]


def _reference_grads(function, inputs, params, upstream):
    """The same kernel's gradients with a fresh gradient buffer per call, as reused buffers must give them."""
    leaves = [t.detach().clone().requires_grad_() for t in inputs + params]
    outputs = function.apply(*leaves)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    torch.autograd.backward(outputs, [g.clone() for g in upstream])
    return [t.grad for t in leaves]


@pytest.mark.parametrize("entry", KERNELS)
def test_the_input_gradient_takes_the_buffer_autograd_alone_holds(generated, entry):
    function, inputs, params = _inputs(entry, generated)
    outputs = function.apply(*inputs, *params)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    arrived, left = [], []
    # The hooks note addresses only: a hook that kept the tensor would hold the buffer itself.
    outputs[0].register_hook(lambda grad: arrived.append(grad.data_ptr()))
    inputs[0].register_hook(lambda grad: left.append(grad.data_ptr()))
    torch.manual_seed(1)
    scales = [torch.randn_like(y) for y in outputs]
    sum(((y * s).sum() for y, s in zip(outputs, scales))).backward()
    assert arrived == left  # d(x) was written over d(y)
    expected = _reference_grads(function, inputs, params, scales)
    for got, want in zip(inputs + params, expected):
        torch.testing.assert_close(got.grad, want)


@pytest.mark.parametrize("entry", KERNELS)
def test_a_gradient_passed_to_backward_is_left_intact(generated, entry):
    function, inputs, params = _inputs(entry, generated)
    outputs = function.apply(*inputs, *params)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    upstream = [torch.randn_like(y) for y in outputs]
    kept = [g.clone() for g in upstream]
    torch.autograd.backward(outputs, upstream)
    assert all(torch.equal(g, k) for g, k in zip(upstream, kept))
    assert inputs[0].grad.data_ptr() not in {g.data_ptr() for g in upstream}
    for got, want in zip(inputs + params, _reference_grads(function, inputs, params, kept)):
        torch.testing.assert_close(got.grad, want)


@pytest.mark.parametrize("entry", KERNELS)
@pytest.mark.parametrize("shared", ["residual", "viewed_residual"])
def test_a_gradient_another_branch_also_reads_is_left_intact(generated, entry, shared):
    """``out = norm(x) + h`` hands one gradient tensor to both branches (the residual of a post-norm block, where
    upstream's in-place RMSNorm is switched off); through a view, the norm gets a view of that tensor."""
    function, inputs, params = _inputs(entry, generated)
    residual = torch.randn(2, 3, 16, dtype=torch.float64, requires_grad=True)
    # An intermediate made before the norm, as a block's residual stream: autograd runs the norm's backward first.
    h = residual * 2.0
    outputs = function.apply(*inputs, *params)
    y = outputs[0] if isinstance(outputs, tuple) else outputs
    if shared == "residual":
        out = y + h
    else:
        out = (y.view(6, 16) + h.view(6, 16)).view(2, 3, 16)
    scale = torch.randn_like(out)
    (out * scale).sum().backward()
    torch.testing.assert_close(residual.grad, 2.0 * scale)
    upstream = [scale] + [torch.zeros_like(o) for o in (outputs[1:] if isinstance(outputs, tuple) else ())]
    for got, want in zip(inputs + params, _reference_grads(function, inputs, params, upstream)):
        torch.testing.assert_close(got.grad, want)


@pytest.mark.parametrize("entry", ["OffsetRMSNorm", "fused_add_rms_norm"])
def test_a_dtensor_gradient_s_shard_is_left_intact(generated, entry, one_rank_mesh):
    """The local shard of a DTensor gradient: only the DTensor could tell whether someone else holds it."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor import distribute_tensor

    function, inputs, params = _inputs(entry, generated)
    placed = [distribute_tensor(t.detach(), one_rank_mesh, [Shard(0)]).requires_grad_() for t in inputs]
    placed += [distribute_tensor(p.detach(), one_rank_mesh, [Replicate()]).requires_grad_() for p in params]
    outputs = function.apply(*placed)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    upstream = [
        distribute_tensor(torch.randn(2, 3, 16, dtype=torch.float64), one_rank_mesh, [Shard(0)]) for _ in outputs
    ]
    kept = [g.to_local().clone() for g in upstream]
    torch.autograd.backward(outputs, upstream)
    assert all(torch.equal(g.to_local(), k) for g, k in zip(upstream, kept))
    for got, want in zip(placed, _reference_grads(function, inputs, params, kept)):
        torch.testing.assert_close(got.grad.full_tensor(), want)
