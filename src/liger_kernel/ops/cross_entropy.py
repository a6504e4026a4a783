"""Fused cross entropy: loss and its gradient in one kernel, the gradient written over the logits.

For each row ``x`` of the logits ``[BT, V]`` with target ``y`` the kernel computes, in fp32,

* ``z = softcap * tanh(x / softcap)`` when ``softcap`` is set (otherwise ``z = x``),
* ``lse = logsumexp(z)`` by an online-softmax pass over the vocabulary in chunks,
* ``ce = (1 - eps) * w[y] * (lse - z[y]) + eps / V * sum_c w[c] * (lse - z[c])`` (torch's definition of
  label smoothing, ``w = 1`` without class weights),
* ``z_loss = s * lse ** 2`` (``s = lse_square_scale``),

and in a second pass the gradient of ``ce / D_ce + z_loss / D_rows`` with respect to ``x``, which it stores in
place of the logits. ``D_ce`` and ``D_rows`` are 1 unless ``reduction == "mean"``; then ``D_rows`` is the number of
non-ignored rows and ``D_ce`` is the sum of ``w[y]`` over them (the count without class weights), as torch
divides. Rows whose target is ``ignore_index`` give zero loss and a zero gradient.

Storing the gradient in the logits buffer saves a ``[BT, V]`` allocation -- for an LLM head the largest tensor
of the step -- at the price that the logits are destroyed whenever a gradient is needed.

On request the first pass also tracks each row's argmax, which gives the predicted tokens (``-1`` for ignored
rows) and the token accuracy without reading the logits again. The loss is computed and reduced in fp32 and
returned in the logits' dtype, as torch does; targets outside ``[0, V)`` other than ``ignore_index`` are
refused before the kernel reads anything.
"""

import torch
import triton
import triton.language as tl

from liger_kernel.ops.utils import element_mul_kernel
from liger_kernel.ops.utils import ensure_contiguous
from liger_kernel.ops.utils import tanh

_REDUCTIONS = ("mean", "sum", "none")
_MAX_CHUNK = 8192


@triton.jit
def _cross_entropy_kernel(
    logits_ptr,
    logits_row_stride,
    target_ptr,
    weight_ptr,
    loss_ptr,
    z_loss_ptr,
    predicted_ptr,
    ce_denominator_ptr,
    row_denominator_ptr,
    ignore_index,
    lse_square_scale,
    label_smoothing,
    softcap,
    # The vocabulary size is a compile-time constant: a model has one, and Triton's CPU interpreter (with
    # numpy >= 2.4) cannot use a runtime scalar as a range() bound.
    n_cols: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_LABEL_SMOOTHING: tl.constexpr,
    HAS_Z_LOSS: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr,
    IS_MEAN: tl.constexpr,
    RETURN_Z_LOSS: tl.constexpr,
    COMPUTE_ARGMAX: tl.constexpr,
    COMPUTE_GRAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    # One division per row; the per-element fp32 division it replaces is far costlier than a multiply.
    inv_softcap = 1.0 / softcap
    row_ptr = logits_ptr + row * logits_row_stride
    target = tl.load(target_ptr + row)

    if target == ignore_index:
        # An ignored row adds nothing; its gradient must still be written, or the logits would stay behind as
        # the "gradient" of that row.
        tl.store(loss_ptr + row, 0.0)
        if RETURN_Z_LOSS:
            tl.store(z_loss_ptr + row, 0.0)
        if COMPUTE_ARGMAX:
            tl.store(predicted_ptr + row, -1)
        if COMPUTE_GRAD:
            for start in range(0, n_cols, BLOCK_SIZE):
                cols = start + tl.arange(0, BLOCK_SIZE)
                tl.store(row_ptr + cols, tl.zeros([BLOCK_SIZE], dtype=row_ptr.dtype.element_ty), mask=cols < n_cols)
        return

    # Pass 1: running max and running sum of exp(z - max) (online softmax); with label smoothing also the
    # weighted sum of z and the sum of the weights, which the smoothing term needs.
    running_max = float("-inf")
    running_sum = 0.0
    weighted_z_sum = 0.0
    weight_sum = 0.0
    best_logit = float("-inf")
    best_index = 0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        z = tl.load(row_ptr + cols, mask=mask, other=float("-inf")).to(tl.float32)
        if COMPUTE_ARGMAX:
            # On the raw logits (softcapping is monotonic but can round distinct logits to one value). A strict
            # ">" keeps the earliest of equal maxima across chunks, and tl.argmax the earliest within one, as
            # torch.argmax does.
            chunk_max = tl.max(z, axis=0)
            better = chunk_max > best_logit
            best_index = tl.where(better, start + tl.argmax(z, axis=0), best_index)
            best_logit = tl.where(better, chunk_max, best_logit)
        if HAS_SOFTCAP:
            # tanh maps the -inf padding to -softcap, so the padding is masked again afterwards.
            z = tl.where(mask, softcap * tanh(z * inv_softcap), float("-inf"))
        new_max = tl.maximum(running_max, tl.max(z, axis=0))
        # A chunk of only -inf logits (a masked-out vocabulary slice) keeps the max at -inf; shifting by 0 then
        # keeps exp() at 0 instead of exp(-inf + inf) = NaN.
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        running_sum = running_sum * tl.exp(running_max - shift) + tl.sum(tl.exp(z - shift), axis=0)
        running_max = new_max
        if HAS_LABEL_SMOOTHING:
            if HAS_WEIGHT:
                w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                weighted_z_sum += tl.sum(w * tl.where(mask, z, 0.0), axis=0)
                weight_sum += tl.sum(w, axis=0)
            else:
                weighted_z_sum += tl.sum(tl.where(mask, z, 0.0), axis=0)
    lse = running_max + tl.log(running_sum)
    if COMPUTE_ARGMAX:
        tl.store(predicted_ptr + row, best_index)

    z_target = tl.load(row_ptr + target).to(tl.float32)
    if HAS_SOFTCAP:
        z_target = softcap * tanh(z_target * inv_softcap)
    if HAS_WEIGHT:
        target_weight = tl.load(weight_ptr + target).to(tl.float32)
    else:
        target_weight = 1.0
    if not HAS_WEIGHT:
        weight_sum = n_cols * 1.0

    nll_scale = target_weight
    if HAS_LABEL_SMOOTHING:
        nll_scale = (1.0 - label_smoothing) * target_weight
    smoothing_per_class = label_smoothing / n_cols

    ce_loss = nll_scale * (lse - z_target)
    if HAS_LABEL_SMOOTHING:
        ce_loss += smoothing_per_class * (weight_sum * lse - weighted_z_sum)
    z_loss = lse_square_scale * lse * lse

    ce_scale = 1.0
    row_scale = 1.0
    if IS_MEAN:
        ce_scale = 1.0 / tl.load(ce_denominator_ptr).to(tl.float32)
        row_scale = 1.0 / tl.load(row_denominator_ptr).to(tl.float32)

    loss = ce_loss * ce_scale
    if HAS_Z_LOSS:
        loss += z_loss * row_scale
    tl.store(loss_ptr + row, loss)
    if RETURN_Z_LOSS:
        tl.store(z_loss_ptr + row, z_loss * row_scale)

    if COMPUTE_GRAD:
        # d loss / d z_j = p_j * softmax_coeff - ce_scale * (nll_scale * [j == y] + eps / V * w_j), where
        # softmax_coeff gathers every term proportional to p_j = softmax(z)_j.
        softmax_coeff = nll_scale
        if HAS_LABEL_SMOOTHING:
            softmax_coeff += smoothing_per_class * weight_sum
        softmax_coeff *= ce_scale
        if HAS_Z_LOSS:
            softmax_coeff += 2.0 * lse_square_scale * lse * row_scale
        target_term = ce_scale * nll_scale
        smoothing_term = ce_scale * smoothing_per_class

        # Pass 2: recompute p chunk by chunk and overwrite the logits with the gradient.
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
            x = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            if HAS_SOFTCAP:
                t = tanh(x * inv_softcap)
                z = softcap * t
            else:
                z = x
            grad = tl.exp(z - lse) * softmax_coeff
            grad = tl.where(cols == target, grad - target_term, grad)
            if HAS_LABEL_SMOOTHING:
                if HAS_WEIGHT:
                    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                    grad -= smoothing_term * w
                else:
                    grad -= smoothing_term
            if HAS_SOFTCAP:
                # z = softcap * tanh(x / softcap)  =>  dz/dx = 1 - tanh(x / softcap)^2
                grad *= 1.0 - t * t
            tl.store(row_ptr + cols, grad.to(row_ptr.dtype.element_ty), mask=mask)


def _chunk_settings(n_cols: int) -> tuple[int, int]:
    """Chunk width for the vocabulary loop and warps per program.

    The kernel streams the row twice, so the chunk only has to keep the memory pipeline busy: on an H200
    (bf16, BT 4096-8192, V 32000-151936) 8192-wide chunks with 8 warps ran at 3.9-4.5 TB/s, up to 20% faster
    than 32768-wide chunks with 32 warps, which hold more registers per program and so fewer programs per SM.
    """
    block_size = min(_MAX_CHUNK, triton.next_power_of_2(n_cols))
    num_warps = 8 if block_size >= 2048 else 4
    return block_size, num_warps


def check_cross_entropy_args(reduction: str, label_smoothing: float, softcap: float | None) -> None:
    """Raise ValueError for arguments the kernel has no meaning for."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1], got {label_smoothing}")
    if softcap is not None and not softcap > 0.0:
        raise ValueError(f"softcap must be positive or None, got {softcap}")


class TargetOutOfBoundsError(ValueError, AssertionError):
    """A target that is neither a class index in ``[0, V)`` nor ``ignore_index``.

    A ValueError like the other argument checks, and an AssertionError too, because upstream Liger-Kernel raises
    one for this case and callers written against it catch that.
    """


def _check_targets(target: torch.Tensor, kept: torch.Tensor, n_cols: int, ignore_index: int) -> None:
    """Raise TargetOutOfBoundsError unless every kept target indexes a column.

    Costs one small reduction and one host sync; without it the kernel would read (and, computing the gradient,
    write) outside the row for such a target.
    """
    if target.numel() == 0:
        return
    smallest, largest = torch.stack(torch.aminmax(torch.where(kept, target, 0))).tolist()
    if smallest < 0 or largest >= n_cols:
        bad = smallest if smallest < 0 else largest
        raise TargetOutOfBoundsError(
            f"Target {bad} is out of bounds: targets must lie in [0, {n_cols}) or equal ignore_index ({ignore_index})"
        )


def cross_entropy_forward(
    _input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None,
    ignore_index: int,
    lse_square_scale: float,
    label_smoothing: float,
    reduction: str,
    softcap: float | None,
    return_z_loss: bool,
    return_token_accuracy: bool = False,
    return_predicted_tokens: bool = False,
    *,
    compute_grad: bool = True,
    _block_size: int | None = None,
):
    """Return ``(loss, z_loss, token_accuracy, predicted_tokens, _input)``; ``_input`` then holds d loss / d input
    (when ``compute_grad``).

    ``loss`` (in the logits' dtype) is a scalar for "mean"/"sum" and ``[BT]`` for "none"; it already includes
    the z-loss, which is returned on its own (reduced the same way, same dtype) only for logging. The other
    outputs are None unless requested: ``token_accuracy`` (fp32) is the fraction of non-ignored rows whose argmax
    is the target (0 when every row is ignored), or per row 1.0 / 0.0 for "none"; ``predicted_tokens`` (int64,
    ``[BT]``) is each row's argmax, -1 for ignored rows. ``_block_size`` overrides the vocabulary chunk width so
    tests can cover several chunks with small vocabularies.
    """
    check_cross_entropy_args(reduction, label_smoothing, softcap)
    if _input.dim() != 2:
        raise ValueError(f"expected logits of shape [BT, V], got {tuple(_input.shape)}")
    n_rows, n_cols = _input.shape
    if target.shape != (n_rows,):
        raise ValueError(f"expected target of shape ({n_rows},), got {tuple(target.shape)}")
    target = target.contiguous()
    if weight is not None:
        if weight.shape != (n_cols,):
            raise ValueError(f"expected weight of shape ({n_cols},), got {tuple(weight.shape)}")
        weight = weight.contiguous()
    kept = target != ignore_index
    _check_targets(target, kept, n_cols, ignore_index)

    block_size, num_warps = _chunk_settings(n_cols)
    if _block_size is not None:
        block_size = _block_size

    loss_1d = torch.empty(n_rows, dtype=torch.float32, device=_input.device)
    z_loss_1d = torch.empty(n_rows, dtype=torch.float32, device=_input.device) if return_z_loss else None
    compute_argmax = return_token_accuracy or return_predicted_tokens
    predicted = torch.empty(n_rows, dtype=torch.int64, device=_input.device) if compute_argmax else None

    is_mean = reduction == "mean"
    ce_denominator = row_denominator = loss_1d  # placeholders: the kernel reads them only for "mean"
    if is_mean:
        # Kept on the device: no host sync. An all-ignored batch gives 0 here, but then no row divides by it.
        row_denominator = kept.sum().to(torch.float32)
        if weight is None:
            ce_denominator = row_denominator
        else:
            safe_target = torch.where(kept, target, torch.zeros_like(target))
            ce_denominator = (weight[safe_target].float() * kept).sum()

    _cross_entropy_kernel[(n_rows,)](
        _input,
        _input.stride(-2),
        target,
        weight if weight is not None else _input,  # placeholder pointer, unread without HAS_WEIGHT
        loss_1d,
        z_loss_1d if return_z_loss else loss_1d,
        predicted if compute_argmax else loss_1d,
        ce_denominator,
        row_denominator,
        ignore_index,
        float(lse_square_scale),
        float(label_smoothing),
        float(softcap) if softcap is not None else 1.0,
        n_cols=n_cols,
        HAS_WEIGHT=weight is not None,
        HAS_LABEL_SMOOTHING=label_smoothing > 0.0,
        HAS_Z_LOSS=lse_square_scale != 0.0,
        HAS_SOFTCAP=softcap is not None,
        IS_MEAN=is_mean,
        RETURN_Z_LOSS=return_z_loss,
        COMPUTE_ARGMAX=compute_argmax,
        COMPUTE_GRAD=compute_grad,
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )

    token_accuracy = None
    if return_token_accuracy:
        correct = ((predicted == target) & kept).float()
        token_accuracy = correct if reduction == "none" else correct.sum() / kept.sum().clamp(min=1)
    predicted_tokens = predicted if return_predicted_tokens else None

    # Summed in fp32, rounded once to the logits' dtype (torch's losses come back in their input's dtype).
    if reduction == "none":
        loss, z_loss = loss_1d, z_loss_1d
    else:
        loss = loss_1d.sum()
        z_loss = z_loss_1d.sum() if return_z_loss else None
    loss = loss.to(_input.dtype)
    if z_loss is not None:
        z_loss = z_loss.to(_input.dtype)
    return loss, z_loss, token_accuracy, predicted_tokens, _input


def cross_entropy_backward(_input: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
    """Scale the gradient stored by the forward pass by the incoming gradient of the loss (in place)."""
    if grad_output.dim() == 0:
        if torch.equal(grad_output, torch.ones_like(grad_output)):
            # The common case (loss.backward() on the loss itself): nothing to scale.
            return _input
        n_rows, n_cols = _input.shape
        block_size, num_warps = _chunk_settings(n_cols)
        element_mul_kernel[(n_rows,)](
            _input,
            _input.stride(-2),
            # The loss, and so its gradient, has the logits' dtype; the kernel multiplies by it in fp32.
            grad_output.to(torch.float32).contiguous(),
            n_cols,
            BLOCK_SIZE=block_size,
            num_warps=num_warps,
        )
        return _input
    # reduction="none": one incoming gradient per row.
    return _input.mul_(grad_output.unsqueeze(-1))


class LigerCrossEntropyFunction(torch.autograd.Function):
    """Cross entropy over ``[BT, V]`` logits with ignore_index, label smoothing, z-loss, softcap and class weights.

    ``apply(_input, target, weight=None, ignore_index=-100, lse_square_scale=0.0, label_smoothing=0.0,
    reduction="mean", softcap=None, return_z_loss=False, return_token_accuracy=False,
    return_predicted_tokens=False)`` returns ``(loss, z_loss, token_accuracy, predicted_tokens)``; each of the
    last three is None unless requested and none of them is differentiable (the z-loss is already part of
    ``loss``). When the logits need a gradient they are overwritten by it in the forward pass.
    """

    @staticmethod
    @ensure_contiguous
    def forward(
        ctx,
        _input: torch.Tensor,
        target: torch.Tensor,
        weight: torch.Tensor | None = None,
        ignore_index: int = -100,
        lse_square_scale: float = 0.0,
        label_smoothing: float = 0.0,
        reduction: str = "mean",
        softcap: float | None = None,
        return_z_loss: bool = False,
        return_token_accuracy: bool = False,
        return_predicted_tokens: bool = False,
    ):
        compute_grad = ctx.needs_input_grad[0]
        loss, z_loss, token_accuracy, predicted_tokens, _input = cross_entropy_forward(
            _input,
            target,
            weight,
            ignore_index,
            lse_square_scale,
            label_smoothing,
            reduction,
            softcap,
            return_z_loss,
            return_token_accuracy,
            return_predicted_tokens,
            compute_grad=compute_grad,
        )
        if compute_grad:
            ctx.save_for_backward(_input.detach())
        extras = [t for t in (z_loss, token_accuracy, predicted_tokens) if t is not None]
        if extras:
            ctx.mark_non_differentiable(*extras)
        return loss, z_loss, token_accuracy, predicted_tokens

    @staticmethod
    def backward(ctx, grad_output, *_extra_grads):
        # One gradient per forward input: _input, then ten that never get one (target, weight, and the options).
        no_grads = (None,) * 10
        if not ctx.needs_input_grad[0]:
            # Autograd still calls backward when only another input (a class `weight` that is an nn.Parameter)
            # requires a gradient; the forward then saved nothing, and no gradient flows to the weight.
            return (None, *no_grads)
        (_input,) = ctx.saved_tensors
        grad_input = cross_entropy_backward(_input, grad_output)
        return (grad_input, *no_grads)


# Upstream Liger-Kernel's name for the kernel. Its arguments are this module's own, not upstream's.
liger_cross_entropy_kernel = _cross_entropy_kernel

__all__ = [
    "LigerCrossEntropyFunction",
    "TargetOutOfBoundsError",
    "check_cross_entropy_args",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "liger_cross_entropy_kernel",
]
