"""Functional forms of the Liger kernels, for code that calls ops directly instead of using modules."""

from dataclasses import dataclass

import torch

from torch.nn import _reduction

from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction


@dataclass
class CrossEntropyOutput:
    """What the Liger cross entropy returns when asked for more than the loss.

    ``loss`` is the (differentiable) loss; ``z_loss``, ``token_accuracy`` and ``predicted_tokens`` are filled in
    only when requested (``return_z_loss``, ``return_token_accuracy``, ``return_predicted_tokens``) and carry no
    gradient.
    """

    loss: torch.Tensor
    z_loss: torch.Tensor | None = None
    token_accuracy: torch.Tensor | None = None
    predicted_tokens: torch.Tensor | None = None


def liger_cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
    lse_square_scale=0.0,
    softcap=None,
    return_z_loss=False,
    return_token_accuracy=False,
    return_predicted_tokens=False,
):
    """Cross entropy of ``[BT, V]`` logits, called like ``torch.nn.functional.cross_entropy``.

    The first seven parameters are torch's, in torch's order (``size_average`` and ``reduce`` are its deprecated
    way of choosing the reduction, honoured the same way). Returns the loss, or a ``CrossEntropyOutput`` when any
    ``return_*`` flag is set.
    """
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    loss, z_loss, token_accuracy, predicted_tokens = LigerCrossEntropyFunction.apply(
        input,
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
    )
    if not (return_z_loss or return_token_accuracy or return_predicted_tokens):
        return loss
    return CrossEntropyOutput(loss, z_loss, token_accuracy, predicted_tokens)


def liger_rms_norm(X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
    """RMSNorm of ``X`` over its last dimension, scaled by ``offset + W`` (not scaled when ``W`` is None)."""
    return LigerRMSNormFunction.apply(X, W, eps, offset, casting_mode, in_place, row_mode)


def liger_swiglu(a, b, gate_multiplier=1.0, down_multiplier=1.0):
    """``silu(a * gate_multiplier) * b * down_multiplier``; backward overwrites ``a`` and ``b`` with their gradients."""
    return LigerSiLUMulFunction.apply(a, b, gate_multiplier, down_multiplier)
