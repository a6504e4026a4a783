"""Fused cross entropy against torch.nn.functional.cross_entropy (plus z-loss and softcap written out by hand).

fp32 results are compared with a float64 reference: the kernel accumulates in fp32 and is usually closer to
the exact value than torch's own fp32 path, so the tight tolerances measure the kernel, not torch's rounding.
"""

import pytest
import torch
import torch.nn.functional as F

from liger_kernel.ops import LigerCrossEntropyFunction
from liger_kernel.ops.cross_entropy import TargetOutOfBoundsError
from liger_kernel.ops.cross_entropy import cross_entropy_backward
from liger_kernel.ops.cross_entropy import cross_entropy_forward
from liger_kernel.transformers.cross_entropy import LigerCrossEntropyLoss
from liger_kernel.transformers.functional import CrossEntropyOutput
from liger_kernel.transformers.functional import liger_cross_entropy
from test.utils import assert_verbose_allclose
from test.utils import infer_device
from test.utils import set_seed
from test.utils import supports_bfloat16

DEVICE = infer_device()
IGNORE_INDEX = -100
REDUCTIONS = ["mean", "sum", "none"]


def make_inputs(bt, vocab, dtype=torch.float32, scale=2.0, n_ignored=2, weighted=False, seed=0):
    """Logits, targets (the last ``n_ignored`` rows set to IGNORE_INDEX) and optional positive class weights."""
    set_seed(seed)
    logits = (torch.randn(bt, vocab, device=DEVICE) * scale).to(dtype)
    target = torch.randint(0, vocab, (bt,), device=DEVICE)
    if n_ignored:
        target[bt - n_ignored :] = IGNORE_INDEX
    weight = torch.rand(vocab, device=DEVICE) + 0.5 if weighted else None
    return logits, target, weight


def reference(
    logits,
    target,
    weight=None,
    lse_square_scale=0.0,
    label_smoothing=0.0,
    reduction="mean",
    softcap=None,
    grad_output=None,
    ref_dtype=torch.float64,
):
    """(loss, z_loss, grad of (loss * grad_output).sum() w.r.t. logits) computed by torch in ``ref_dtype``."""
    x = logits.detach().to(ref_dtype).requires_grad_()
    capped = softcap * torch.tanh(x / softcap) if softcap is not None else x
    ce = F.cross_entropy(
        capped,
        target,
        weight=weight.to(ref_dtype) if weight is not None else None,
        ignore_index=IGNORE_INDEX,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )
    kept = target != IGNORE_INDEX
    z_rows = lse_square_scale * torch.logsumexp(capped, dim=-1) ** 2 * kept
    if reduction == "none":
        z_loss = z_rows
    elif reduction == "sum":
        z_loss = z_rows.sum()
    else:
        z_loss = z_rows.sum() / kept.sum()
    loss = ce + z_loss
    scale = torch.ones_like(loss) if grad_output is None else grad_output.to(ref_dtype)
    (grad,) = torch.autograd.grad((loss * scale).sum(), x)
    return loss.detach(), z_loss.detach(), grad


def run_liger(logits, target, grad_output=None, **kwargs):
    """Loss, z-loss (or None) and input gradient of LigerCrossEntropyLoss on a copy of ``logits``."""
    x = logits.detach().clone().requires_grad_()
    module = LigerCrossEntropyLoss(ignore_index=IGNORE_INDEX, **kwargs)
    out = module(x, target)
    loss, z_loss = (out.loss, out.z_loss) if kwargs.get("return_z_loss") else (out, None)
    scale = torch.ones_like(loss) if grad_output is None else grad_output
    (loss * scale).sum().backward()
    return loss, z_loss, x.grad


def assert_matches(actual, expected, rtol=1e-5, atol=1e-6, what=""):
    assert_verbose_allclose(actual.float(), expected.float(), rtol=rtol, atol=atol, extra_info=what)


@pytest.mark.parametrize("vocab", [127, 509, 4099])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_torch_fp32(vocab, reduction, label_smoothing, weighted):
    logits, target, weight = make_inputs(8, vocab, weighted=weighted)
    loss, _, grad = run_liger(logits, target, weight=weight, label_smoothing=label_smoothing, reduction=reduction)
    ref_loss, _, ref_grad = reference(logits, target, weight, label_smoothing=label_smoothing, reduction=reduction)
    assert loss.dtype == torch.float32
    assert loss.shape == ref_loss.shape
    assert_matches(loss, ref_loss, what="loss")
    assert_matches(grad, ref_grad, what="grad")


@pytest.mark.parametrize("vocab, block_size", [(1000, 128), (4099, 512)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_several_chunks_with_every_feature(vocab, block_size, reduction):
    # A chunk narrower than the vocabulary makes the online softmax merge several partial maxima and sums.
    logits, target, weight = make_inputs(6, vocab, scale=4.0, weighted=True)
    options = dict(lse_square_scale=1e-3, label_smoothing=0.2, softcap=6.0)
    loss, z_loss, _, _, grad = cross_entropy_forward(
        logits.clone(),
        target,
        weight,
        IGNORE_INDEX,
        reduction=reduction,
        return_z_loss=True,
        _block_size=block_size,
        **options,
    )
    grad = cross_entropy_backward(grad, torch.ones_like(loss))
    ref_loss, ref_z_loss, ref_grad = reference(logits, target, weight, reduction=reduction, **options)
    assert_matches(loss, ref_loss, what="loss")
    assert_matches(z_loss, ref_z_loss, what="z_loss")
    assert_matches(grad, ref_grad, what="grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("lse_square_scale", [1e-4, 0.01])
def test_z_loss(reduction, lse_square_scale):
    logits, target, _ = make_inputs(8, 509, scale=3.0)
    loss, z_loss, grad = run_liger(
        logits, target, lse_square_scale=lse_square_scale, reduction=reduction, return_z_loss=True
    )
    ref_loss, ref_z_loss, ref_grad = reference(logits, target, lse_square_scale=lse_square_scale, reduction=reduction)
    assert z_loss.shape == ref_z_loss.shape
    assert not z_loss.requires_grad  # already part of the loss; returned for logging only
    assert_matches(loss, ref_loss, what="loss")
    assert_matches(z_loss, ref_z_loss, what="z_loss")
    assert_matches(grad, ref_grad, what="grad")


def test_z_loss_changes_loss_without_being_returned():
    logits, target, _ = make_inputs(8, 127)
    plain, _, _ = run_liger(logits, target)
    with_z, z_loss, _ = run_liger(logits, target, lse_square_scale=0.01)
    assert z_loss is None
    ref_loss, ref_z_loss, _ = reference(logits, target, lse_square_scale=0.01)
    assert ref_z_loss > 0.01
    assert_matches(with_z, ref_loss)
    assert_matches(with_z - plain, ref_z_loss, atol=1e-5)


def test_return_z_loss_with_zero_scale_gives_zero():
    logits, target, _ = make_inputs(8, 127)
    loss, z_loss, _ = run_liger(logits, target, return_z_loss=True)
    ref_loss, _, _ = reference(logits, target)
    assert z_loss.item() == 0.0
    assert_matches(loss, ref_loss)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("softcap", [3.0, 30.0])
def test_softcap(reduction, softcap):
    # Scale 10 puts many logits in tanh's saturated region for softcap 3, where the gradient nearly vanishes.
    logits, target, _ = make_inputs(8, 509, scale=10.0)
    loss, _, grad = run_liger(logits, target, softcap=softcap, reduction=reduction)
    ref_loss, _, ref_grad = reference(logits, target, softcap=softcap, reduction=reduction)
    assert_matches(loss, ref_loss, what="loss")
    assert_matches(grad, ref_grad, what="grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_weights_with_ignored_rows(reduction, label_smoothing):
    # Heavily skewed weights make the weighted-mean denominator differ clearly from the row count.
    logits, target, _ = make_inputs(10, 127, n_ignored=4)
    set_seed(1)
    weight = torch.rand(127, device=DEVICE) ** 4 * 10
    loss, _, grad = run_liger(logits, target, weight=weight, label_smoothing=label_smoothing, reduction=reduction)
    ref_loss, _, ref_grad = reference(logits, target, weight, label_smoothing=label_smoothing, reduction=reduction)
    assert_matches(loss, ref_loss, what="loss")
    assert_matches(grad, ref_grad, what="grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ignored_rows_get_zero_loss_and_gradient(reduction):
    logits, target, _ = make_inputs(8, 509, n_ignored=3)
    loss, _, grad = run_liger(logits, target, reduction=reduction, label_smoothing=0.1, lse_square_scale=1e-3)
    assert torch.all(grad[-3:] == 0)
    assert torch.all(grad[:-3].abs().sum(dim=-1) > 0)
    if reduction == "none":
        assert torch.all(loss[-3:] == 0)
        assert torch.all(loss[:-3] > 0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_all_rows_ignored(reduction):
    logits, target, _ = make_inputs(4, 127, n_ignored=4)
    loss, z_loss, grad = run_liger(logits, target, reduction=reduction, lse_square_scale=1e-3, return_z_loss=True)
    # torch returns NaN for a mean over no rows; the kernel returns 0 so one empty micro-batch cannot poison a
    # training run. For "sum" and "none" both give zeros.
    if reduction != "mean":
        ref_loss, _, _ = reference(logits, target, reduction=reduction)
        assert_matches(loss, ref_loss)
    assert torch.all(loss == 0)
    assert torch.all(z_loss == 0)
    assert torch.all(grad == 0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scaled_grad_output(reduction):
    logits, target, weight = make_inputs(8, 509, weighted=True)
    if reduction == "none":
        grad_output = torch.linspace(-2.0, 3.0, 8, device=DEVICE)
    else:
        grad_output = torch.tensor(3.0, device=DEVICE)
    options = dict(weight=weight, label_smoothing=0.1, lse_square_scale=1e-3, reduction=reduction)
    _, _, grad = run_liger(logits, target, grad_output=grad_output, **options)
    _, _, ref_grad = reference(logits, target, grad_output=grad_output, **options)
    assert_matches(grad, ref_grad, what="grad")


def test_masked_vocabulary_slice():
    # -inf logits fill the whole first chunk of every row: the online max must not turn into NaN.
    logits, target, _ = make_inputs(6, 509, n_ignored=1)
    logits[:, :200] = float("-inf")
    target = torch.where(target == IGNORE_INDEX, target, 200 + target % 309)
    loss, _, _, _, grad = cross_entropy_forward(
        logits.clone(), target, None, IGNORE_INDEX, 0.0, 0.0, "mean", None, False, _block_size=128
    )
    ref_loss, _, ref_grad = reference(logits, target)
    assert_matches(loss, ref_loss, what="loss")
    assert_matches(grad, ref_grad, what="grad")


def test_apply_equals_module():
    logits, target, weight = make_inputs(8, 509, weighted=True)
    options = dict(
        weight=weight, lse_square_scale=1e-3, label_smoothing=0.1, reduction="sum", softcap=20.0, return_z_loss=True
    )
    loss, z_loss, grad = run_liger(logits, target, **options)

    x = logits.clone().requires_grad_()
    fn_loss, fn_z_loss, accuracy, predicted = LigerCrossEntropyFunction.apply(
        x, target, weight, IGNORE_INDEX, 1e-3, 0.1, "sum", 20.0, True
    )
    assert accuracy is None and predicted is None
    fn_loss.backward()
    assert torch.equal(fn_loss, loss)
    assert torch.equal(fn_z_loss, z_loss)
    assert torch.equal(x.grad, grad)


def test_apply_defaults_and_no_z_loss():
    logits, target, _ = make_inputs(8, 127)
    x = logits.clone().requires_grad_()
    loss, *extras = LigerCrossEntropyFunction.apply(x, target)
    assert extras == [None, None, None]
    loss.backward()
    ref_loss, _, ref_grad = reference(logits, target)
    assert_matches(loss, ref_loss)
    assert_matches(x.grad, ref_grad)


def test_functional_equals_module():
    logits, target, weight = make_inputs(8, 509, weighted=True)
    options = dict(
        weight=weight, lse_square_scale=1e-3, label_smoothing=0.1, reduction="mean", softcap=20.0, return_z_loss=True
    )
    loss, z_loss, grad = run_liger(logits, target, **options)
    x = logits.clone().requires_grad_()
    out = liger_cross_entropy(x, target, ignore_index=IGNORE_INDEX, **options)
    assert isinstance(out, CrossEntropyOutput)
    fn_loss, fn_z_loss = out.loss, out.z_loss
    fn_loss.backward()
    assert torch.equal(fn_loss, loss)
    assert torch.equal(fn_z_loss, z_loss)
    assert torch.equal(x.grad, grad)


def test_logits_untouched_without_grad():
    logits, target, _ = make_inputs(8, 509)
    original = logits.clone()
    loss = LigerCrossEntropyLoss()(logits, target)
    ref_loss, _, _ = reference(logits, target)
    assert_matches(loss, ref_loss)
    # Logits that need no gradient (e.g. produced under torch.no_grad for evaluation) are only read.
    assert torch.equal(logits, original)


def test_weight_requiring_grad_with_logits_not_requiring_grad():
    # Autograd calls backward because the weight (an nn.Parameter) requires a gradient, although the logits do
    # not and the forward saved nothing: backward must return no gradient instead of failing.
    logits, target, weight = make_inputs(4, 33, weighted=True)
    weight = torch.nn.Parameter(weight)
    original = logits.clone()
    loss = LigerCrossEntropyFunction.apply(logits, target, weight, IGNORE_INDEX)[0]
    assert loss.requires_grad
    loss.backward()
    assert weight.grad is None
    ref_loss, _, _ = reference(logits, target, weight.detach())
    assert_matches(loss, ref_loss)
    assert torch.equal(logits, original)


def test_non_contiguous_logits():
    logits, target, _ = make_inputs(8, 254)
    target = torch.where(target == IGNORE_INDEX, target, target % 127)
    x = logits.clone().requires_grad_()
    LigerCrossEntropyLoss()(x[:, ::2], target).backward()  # every other column: stride 2 along the vocabulary
    ref_loss, _, ref_grad = reference(logits[:, ::2], target)
    assert_matches(x.grad[:, ::2], ref_grad)
    assert torch.all(x.grad[:, 1::2] == 0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(reduction="avg"), "reduction"),
        (dict(label_smoothing=1.5), "label_smoothing"),
        (dict(label_smoothing=-0.1), "label_smoothing"),
        (dict(softcap=0.0), "softcap"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LigerCrossEntropyLoss(**kwargs)
    logits, target, _ = make_inputs(2, 31, n_ignored=0)
    options = dict(reduction="mean", label_smoothing=0.0, softcap=None) | kwargs
    with pytest.raises(ValueError, match=message):
        LigerCrossEntropyFunction.apply(
            logits,
            target,
            None,
            IGNORE_INDEX,
            0.0,
            options["label_smoothing"],
            options["reduction"],
            options["softcap"],
        )


def test_extra_repr():
    text = repr(LigerCrossEntropyLoss(label_smoothing=0.1, reduction="sum", softcap=30.0, return_z_loss=True))
    assert "label_smoothing=0.1" in text
    assert "reduction='sum'" in text
    assert "softcap=30.0" in text
    assert "return_z_loss=True" in text


@pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (not the CPU interpreter)")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("vocab", [509, 32000])
def test_bf16(reduction, vocab):
    logits, target, weight = make_inputs(16, vocab, dtype=torch.bfloat16, weighted=True)
    options = dict(weight=weight, label_smoothing=0.1, lse_square_scale=1e-4, softcap=30.0, reduction=reduction)
    loss, _, grad = run_liger(logits, target, **options)
    ref_loss, _, ref_grad = reference(logits, target, **options)
    assert grad.dtype == torch.bfloat16
    assert loss.dtype == torch.bfloat16  # like torch's loss for bf16 logits
    assert_matches(loss, ref_loss, rtol=1e-2, atol=1e-3, what="loss")
    # bf16 keeps 8 bits of mantissa: compare relative to the gradient's scale.
    assert_matches(grad, ref_grad, rtol=1e-2, atol=1e-2 * ref_grad.abs().max().item(), what="grad")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="real LLM shapes only on a GPU")
@pytest.mark.parametrize("bt, vocab", [(4096, 32000), (8192, 128256)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_real_shapes(bt, vocab, dtype):
    if dtype == torch.bfloat16 and not supports_bfloat16():
        pytest.skip("bf16 needs an Ampere+ GPU")
    logits, target, _ = make_inputs(bt, vocab, dtype=dtype, n_ignored=bt // 8)
    options = dict(label_smoothing=0.1, lse_square_scale=1e-4)
    loss, _, grad = run_liger(logits, target, **options)
    ref_loss, _, ref_grad = reference(logits, target, ref_dtype=torch.float32, **options)
    if dtype == torch.float32:
        assert_matches(loss, ref_loss, what="loss")
        assert_matches(grad, ref_grad, rtol=1e-4, atol=1e-8, what="grad")
    else:
        assert_matches(loss, ref_loss, rtol=1e-2, what="loss")
        assert_matches(grad, ref_grad, rtol=1e-2, atol=1e-2 * ref_grad.abs().max().item(), what="grad")


# Token accuracy, predicted tokens, CrossEntropyOutput -------------------------------------------------------
def expected_predictions(logits, target):
    """torch's argmax of every row, -1 for ignored rows."""
    predicted = logits.float().argmax(dim=-1)
    return torch.where(target == IGNORE_INDEX, torch.full_like(predicted, -1), predicted)


def expected_accuracy(logits, target, reduction):
    kept = target != IGNORE_INDEX
    correct = ((logits.float().argmax(dim=-1) == target) & kept).float()
    return correct if reduction == "none" else correct.sum() / kept.sum()


@pytest.mark.parametrize("vocab, block_size", [(509, None), (1000, 128), (4099, 512)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("softcap", [None, 3.0])
def test_predicted_tokens_and_accuracy_match_torch_argmax(vocab, block_size, reduction, softcap):
    logits, target, _ = make_inputs(12, vocab, scale=3.0, n_ignored=3)
    # Make half the kept rows right, so the accuracy is neither 0 nor 1, and put some maxima in later chunks.
    target[:4] = logits[:4].argmax(dim=-1)
    logits[4, vocab - 1] = 100.0
    target[5] = vocab - 1
    logits[5, vocab - 1] = 100.0
    loss, z_loss, accuracy, predicted, grad = cross_entropy_forward(
        logits.clone(),
        target,
        None,
        IGNORE_INDEX,
        1e-3,
        0.1,
        reduction,
        softcap,
        False,
        True,
        True,
        _block_size=block_size,
    )
    assert z_loss is None
    assert predicted.dtype == torch.int64 and predicted.shape == (12,)
    assert torch.equal(predicted, expected_predictions(logits, target))
    assert accuracy.dtype == torch.float32
    assert accuracy.shape == ((12,) if reduction == "none" else ())
    assert_matches(accuracy, expected_accuracy(logits, target, reduction), what="accuracy")
    # Asking for the metrics changes neither the loss nor the gradient.
    plain_loss, _, _, _, plain_grad = cross_entropy_forward(
        logits.clone(), target, None, IGNORE_INDEX, 1e-3, 0.1, reduction, softcap, False, _block_size=block_size
    )
    assert torch.equal(loss, plain_loss)
    assert torch.equal(grad, plain_grad)


def test_argmax_ties_pick_the_first_index_like_torch():
    # Equal maxima within one chunk and across chunks (chunks of 128 over 1000 columns).
    logits = torch.zeros(3, 1000, device=DEVICE)
    logits[0, [5, 7]] = 2.0
    logits[1, [300, 900]] = 2.0
    logits[2] = -1.0  # every column ties
    target = torch.tensor([7, 300, 0], device=DEVICE)
    *_, predicted, _ = cross_entropy_forward(
        logits.clone(), target, None, IGNORE_INDEX, 0.0, 0.0, "mean", None, False, False, True, _block_size=128
    )
    assert predicted.tolist() == logits.argmax(dim=-1).tolist() == [5, 300, 0]


@pytest.mark.parametrize(
    "flags", [(False, False, False), (True, False, False), (False, True, False), (False, False, True), (True,) * 3]
)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_output_type_follows_the_return_flags(flags, reduction):
    return_z_loss, return_token_accuracy, return_predicted_tokens = flags
    logits, target, _ = make_inputs(8, 127, n_ignored=2)
    x = logits.clone().requires_grad_()
    module = LigerCrossEntropyLoss(
        lse_square_scale=1e-3,
        reduction=reduction,
        return_z_loss=return_z_loss,
        return_token_accuracy=return_token_accuracy,
        return_predicted_tokens=return_predicted_tokens,
    )
    out = module(x, target)
    ref_loss, ref_z_loss, ref_grad = reference(logits, target, lse_square_scale=1e-3, reduction=reduction)
    if not any(flags):
        assert isinstance(out, torch.Tensor)
        loss = out
    else:
        assert isinstance(out, CrossEntropyOutput)
        loss = out.loss
        assert (out.z_loss is not None) == return_z_loss
        assert (out.token_accuracy is not None) == return_token_accuracy
        assert (out.predicted_tokens is not None) == return_predicted_tokens
        for extra in (out.z_loss, out.token_accuracy, out.predicted_tokens):
            assert extra is None or not extra.requires_grad
        if return_z_loss:
            assert_matches(out.z_loss, ref_z_loss, what="z_loss")
        if return_token_accuracy:
            assert_matches(out.token_accuracy, expected_accuracy(logits, target, reduction), what="accuracy")
        if return_predicted_tokens:
            assert torch.equal(out.predicted_tokens, expected_predictions(logits, target))
    assert_matches(loss, ref_loss, what="loss")
    (loss * torch.ones_like(loss)).sum().backward()
    assert_matches(x.grad, ref_grad, what="grad")


def test_accuracy_of_an_all_ignored_batch_is_zero():
    logits, target, _ = make_inputs(4, 127, n_ignored=4)
    out = liger_cross_entropy(logits, target, return_token_accuracy=True, return_predicted_tokens=True)
    assert out.token_accuracy.item() == 0.0
    assert torch.all(out.predicted_tokens == -1)


# Loss dtype, out-of-range targets, torch's argument order ----------------------------------------------------
LOW_PRECISION = [
    pytest.param(torch.float16, id="fp16"),  # the interpreter computes in fp16 (NumPy has it), so the CPU runs it
    pytest.param(
        torch.bfloat16,
        id="bf16",
        marks=pytest.mark.skipif(not supports_bfloat16(), reason="bf16 needs an Ampere+ GPU (no interpreter)"),
    ),
]


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_loss_and_z_loss_come_back_in_the_logits_dtype(dtype, reduction):
    logits, target, _ = make_inputs(8, 509, dtype=dtype)
    x = logits.clone().requires_grad_()
    out = LigerCrossEntropyLoss(reduction=reduction, lse_square_scale=1e-4, return_z_loss=True)(x, target)
    torch_loss = F.cross_entropy(logits.clone(), target, reduction=reduction)
    assert out.loss.dtype == out.z_loss.dtype == torch_loss.dtype == dtype
    ref_loss, ref_z_loss, ref_grad = reference(logits, target, lse_square_scale=1e-4, reduction=reduction)
    # One rounding of an fp32-accumulated value: within half an ulp of the exact loss.
    assert_matches(out.loss, ref_loss, rtol=2 * torch.finfo(dtype).eps, atol=1e-6, what="loss")
    assert_matches(out.z_loss, ref_z_loss, rtol=2 * torch.finfo(dtype).eps, atol=1e-6, what="z_loss")
    # The low-precision loss's gradient (3.0 here) still scales the stored gradient.
    (out.loss * torch.ones_like(out.loss) * 3.0).sum().backward()
    assert x.grad.dtype == dtype
    assert_matches(x.grad, 3.0 * ref_grad, rtol=1e-2, atol=1e-2 * ref_grad.abs().max().item(), what="grad")


@pytest.mark.parametrize("bad_target", [127, 1000, -1, -101])
@pytest.mark.parametrize("ignore_index", [IGNORE_INDEX, 3])
def test_out_of_range_target_raises_and_leaves_logits_untouched(bad_target, ignore_index):
    logits, target, _ = make_inputs(6, 127, n_ignored=0)
    target[-1] = ignore_index  # an ignored row is fine, whatever ignore_index is
    target[2] = bad_target
    x = logits.clone().requires_grad_()
    with pytest.raises(TargetOutOfBoundsError, match="out of bounds") as error:
        LigerCrossEntropyLoss(ignore_index=ignore_index)(x, target)
    # A ValueError like every other argument check, and an AssertionError as in upstream Liger-Kernel.
    assert isinstance(error.value, ValueError) and isinstance(error.value, AssertionError)
    assert str(bad_target) in str(error.value)
    assert torch.equal(x.detach(), logits)


def test_liger_cross_entropy_takes_torch_arguments_in_torch_order():
    logits, target, weight = make_inputs(8, 127, weighted=True)
    # F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    args = (weight, None, IGNORE_INDEX, None, "sum", 0.1)
    assert_matches(liger_cross_entropy(logits, target, *args), F.cross_entropy(logits, target, *args))
    # The deprecated size_average / reduce pick the reduction as they do in torch.
    for size_average, reduce, reduction in [(False, None, "sum"), (None, False, "none"), (True, True, "mean")]:
        with pytest.warns(UserWarning):
            legacy = liger_cross_entropy(logits, target, size_average=size_average, reduce=reduce)
        assert_matches(legacy, liger_cross_entropy(logits, target, reduction=reduction))
