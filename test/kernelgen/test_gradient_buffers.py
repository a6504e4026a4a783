"""Generated row kernels write the input's gradient over the output gradient's buffer exactly where autograd alone
holds that buffer (upstream Liger's in-place RMSNorm saving, one [rows, columns] tensor at peak), for norms written
in several styles, and leave every gradient someone else can still read intact: one passed to ``backward``, one an
add also hands to a residual branch, one a view's base shares with another branch. Between forward and backward they
keep one [rows, columns] tensor (the input, or the sum a fused add returns), and their backward allocates none where
it may take the output gradient's buffer: in training's case (the output read by a later op and dropped) they peak
at one such tensor, as upstream's in-place RMSNorm does."""

import gc
import sys
import weakref

from pathlib import Path

import pytest
import torch

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from benchmark.scripts.compare_with_upstream import Consume
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from test.kernelgen.conftest import copy_checkout
from test.kernelgen.conftest import import_generated_ops
from test.transformers import test_dtensor_utils
from tools.kernelgen.analyze import analyze
from tools.kernelgen.generate import plan_new
from tools.kernelgen.repo import LigerRepo
from tools.kernelgen.writer import write_all

# The styles of issue 43's memory table (the GPU checkout generates them as NAME_gen): Gemma's RMSNorm (.float(),
# 1 + weight, .to(x.dtype)), an RMSNorm without weight, an add + RMSNorm returning (normed, sum), a LayerNorm written
# with .mean and ** 2, F.normalize.
NORMS = Path(__file__).parent / "fixtures" / "norms"
STYLES = ["gemma_style_rms_norm", "weightless_rms_norm", "add_rms_norm", "mean_square_layer_norm", "normalize_rows"]
# A one-rank gloo mesh for the DTensor case (the shared module's tests' fixture).
one_rank_mesh = test_dtensor_utils.one_rank_mesh
# Built-in references too: Llama's RMSNorm and a norm with two outputs.
KERNELS = STYLES + ["rms_norm", "fused_add_rms_norm"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("buffers") / "liger")
    kernels = {}
    for entry in KERNELS:
        reference = str(NORMS / f"{entry}.py") if entry in STYLES else entry
        profile = analyze(reference, name=f"buffers_{entry}")
        assert profile.tier == 2, profile.notes.tier_reason
        write_all(root, plan_new(LigerRepo.open(root), profile).changes)
        ops = import_generated_ops(root, profile.operation_name)
        parameters = [torch.rand(16, dtype=torch.float64) + 0.5 for _ in profile.parameters]
        kernels[entry] = getattr(ops, profile.function_class_name), parameters, len(profile.inputs), ops
    return kernels


def _inputs(entry, kernels, dtype=torch.float64):
    function, parameters, n_inputs, _ = kernels[entry]
    torch.manual_seed(0)
    inputs = [torch.randn(2, 3, 16, dtype=dtype, requires_grad=True) for _ in range(n_inputs)]
    return function, inputs, [p.to(dtype, copy=True).requires_grad_() for p in parameters]


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


@pytest.mark.parametrize("entry", ["gemma_style_rms_norm", "fused_add_rms_norm"])
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


class _RowBuffers(TorchDispatchMode):
    """Notes every tensor storage of at least ``min_bytes`` that code of ``source`` (a generated ops file, on the
    Python stack) creates while the mode is on, as ``(op, shape, dtype)``. Views and results written into an
    argument create none; the Triton interpreter's host copies of a launch's arguments (and the copies back) are
    not the kernel's, and a GPU launch makes none."""

    def __init__(self, source: str, min_bytes: int):
        super().__init__()
        self.source, self.min_bytes, self.created = source, min_bytes, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(result):
            if not isinstance(tensor, torch.Tensor) or tensor.untyped_storage().data_ptr() in given:
                continue
            if tensor.untyped_storage().nbytes() >= self.min_bytes and _from(self.source) and not _in_interpreter():
                self.created.append((str(func), tuple(tensor.shape), tensor.dtype))
        return result


def _on_stack(matches) -> bool:
    """Whether a frame of the Python stack runs code of a file whose name ``matches``."""
    frame = sys._getframe()
    while frame is not None and not matches(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None


def _from(source: str) -> bool:
    return _on_stack(source.__eq__)


def _in_interpreter() -> bool:
    return _on_stack(lambda name: "triton" in name and "interpreter" in name)


def _backward_buffers(ops, outputs, scales=None, upstream=None):
    """The storages of [rows, columns] or more the kernel's code creates in the backward of ``outputs``: through
    a loss that scales each output by ``scales`` and sums it (autograd alone then holds the gradients the kernel
    gets), or with the caller's gradients ``upstream``."""
    row_bytes = outputs[0].numel() * outputs[0].element_size()
    with _RowBuffers(ops.__file__, row_bytes) as buffers:
        if upstream is None:
            sum(((y * s).sum() for y, s in zip(outputs, scales))).backward()
        else:
            torch.autograd.backward(outputs, upstream)
    return buffers.created


def _split_or_not(ops, monkeypatch, split):
    """``split``: "fused", "split" (rows too long to hold beside the parameter gradients' sums: the split path's
    passes) or "sweep" (the same rows on one device swept whole by neighbouring programs, where its loads fit)."""
    if split == "fused":
        return
    if not hasattr(ops, "backward_schedule"):
        pytest.skip("no parameter gradients: one device's backward never splits the rows")
    if split == "sweep" and not hasattr(ops, "sweep_settings"):
        pytest.skip("its row sums are not all swept (or it takes no sweep): the split path's passes")
    monkeypatch.setattr(ops, "backward_schedule", lambda *_: (True, False))
    if split == "split" and hasattr(ops, "sweep_settings"):
        monkeypatch.setattr(ops, "sweep_settings", lambda *_: None)


@pytest.mark.parametrize("split", ["fused", "split"])
@pytest.mark.parametrize("entry", KERNELS)
def test_the_backward_allocates_no_row_tensor_where_it_takes_the_output_gradient(generated, entry, split, monkeypatch):
    """bf16, as on the GPU: no d(x) of its own, no fp32 copy of a row, no [rows, columns] partial sums; the
    gradients are those of a fresh buffer (the split path reads d(y) in two passes)."""
    *_, ops = generated[entry]
    _split_or_not(ops, monkeypatch, split)
    function, inputs, params = _inputs(entry, generated, torch.bfloat16)
    outputs = function.apply(*inputs, *params)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    scales = [torch.randn_like(y) for y in outputs]
    assert _backward_buffers(ops, outputs, scales) == []
    expected = _reference_grads(function, inputs, params, scales)
    for got, want in zip(inputs + params, expected):
        torch.testing.assert_close(got.grad, want)


@pytest.mark.parametrize("entry", KERNELS)
def test_the_sweep_gives_d_x_a_buffer_of_its_own(generated, entry, monkeypatch):
    """The sweep does not write d(x) into d(y)'s buffer even where autograd alone holds it: a program's neighbours
    may still be reading a row whole for their sums when it writes its block. d(x) is the one [rows, columns]
    tensor it allocates (upstream's peak), and its gradients are those of a fresh buffer."""
    *_, ops = generated[entry]
    _split_or_not(ops, monkeypatch, "sweep")
    function, inputs, params = _inputs(entry, generated, torch.bfloat16)
    outputs = function.apply(*inputs, *params)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    scales = [torch.randn_like(y) for y in outputs]
    created = _backward_buffers(ops, outputs, scales)
    assert [(shape, dtype) for _, shape, dtype in created] == [(tuple(inputs[0].shape), torch.bfloat16)]
    expected = _reference_grads(function, inputs, params, scales)
    for got, want in zip(inputs + params, expected):
        torch.testing.assert_close(got.grad, want)


@pytest.mark.parametrize("split", ["fused", "split", "sweep"])
@pytest.mark.parametrize("entry", KERNELS)
def test_a_caller_s_gradient_costs_the_input_gradient_alone(generated, entry, split, monkeypatch):
    """Where the caller holds d(y), d(x) is the one [rows, columns] tensor the backward allocates (the count above
    sees what a backward allocates)."""
    *_, ops = generated[entry]
    _split_or_not(ops, monkeypatch, split)
    function, inputs, params = _inputs(entry, generated, torch.bfloat16)
    outputs = function.apply(*inputs, *params)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    created = _backward_buffers(ops, outputs, upstream=[torch.randn_like(y) for y in outputs])
    assert [(shape, dtype) for _, shape, dtype in created] == [(tuple(inputs[0].shape), torch.bfloat16)]


@pytest.mark.parametrize("entry", KERNELS)
def test_forward_keeps_one_row_tensor_for_the_backward(generated, entry):
    """What the Function saves of [rows, columns]: one tensor the caller holds anyway (the input, or the sum a fused
    add returns), in its own dtype; no fp32 copy, no normalised output: upstream's RMSNorm keeps X alone."""
    function, inputs, params = _inputs(entry, generated, torch.bfloat16)
    saved = []

    def pack(tensor):
        if tensor.numel() >= inputs[0].numel():
            saved.append((tensor.untyped_storage().data_ptr(), tensor.dtype))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        outputs = function.apply(*inputs, *params)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    held = {t.untyped_storage().data_ptr() for t in inputs + list(outputs)}
    assert len(saved) == 1 and saved[0][0] in held and saved[0][1] == torch.bfloat16


class _LiveBytes(TorchDispatchMode):
    """The bytes of the storages created while the mode is on that are still alive, and their peak (the Triton
    interpreter's host copies left out, as in ``_RowBuffers``)."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.alive = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(result):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            if storage.data_ptr() in given | self.alive or _in_interpreter():
                continue
            self.alive.add(storage.data_ptr())
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._freed, storage.data_ptr(), storage.nbytes())
        return result

    def _freed(self, address, nbytes):
        self.alive.discard(address)
        self.live -= nbytes


class _ConsumeCollected(Consume):
    """``Consume``, after a collection: the Triton interpreter's copies of a launch's arguments sit in reference
    cycles that keep the output's storage until the collector runs (a GPU launch keeps nothing)."""

    @staticmethod
    def forward(ctx, y, dy):
        gc.collect()
        return Consume.forward(ctx, y, dy)


def _training_peak(apply, inputs) -> float:
    """Peak bytes of a step whose output a later op reads and drops, its gradient autograd's alone
    (compare_with_upstream --memory-dy autograd), in [rows, columns] tensors of the input."""
    dy = torch.randn_like(inputs[0])
    for tensor in inputs:
        tensor.grad = None
    with _LiveBytes() as live:
        _ConsumeCollected.apply(apply(*inputs), dy).backward()
    return live.peak / (inputs[0].numel() * inputs[0].element_size())


@pytest.fixture(scope="module")
def training_inputs():
    torch.manual_seed(0)
    return torch.randn(64, 64, dtype=torch.bfloat16, requires_grad=True)


@pytest.fixture(scope="module")
def upstream_training_peak(training_inputs):
    """The host library's RMSNorm with in_place=True (upstream's default: d(x) always over d(y))."""
    weight = torch.rand(64, dtype=torch.bfloat16).add(0.5).requires_grad_()
    rms_norm = lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", True)  # noqa: E731
    return _training_peak(rms_norm, [training_inputs, weight])


@pytest.mark.parametrize("entry", [name for name in KERNELS if "add" not in name])
def test_training_s_peak_is_upstream_in_place_rms_norm_s(generated, entry, training_inputs, upstream_training_peak):
    """One [rows, columns] tensor at peak (the output in the forward, then d(y) that d(x) is written over), as
    upstream's in-place RMSNorm; partial sums of the parameters aside (a fifth of it at this shape), a d(x) of its
    own or a copy of a row would be one or two more."""
    function, parameters, *_ = generated[entry]
    params = [torch.rand(64, dtype=torch.bfloat16).add(0.5).requires_grad_() for _ in parameters]
    assert upstream_training_peak < 1.5
    assert _training_peak(function.apply, [training_inputs, *params]) < upstream_training_peak + 0.5
