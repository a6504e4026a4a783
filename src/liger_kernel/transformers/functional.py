"""Functional forms of the Liger kernels, for code that calls ops directly instead of using modules."""

from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction


def liger_cross_entropy(
    input,
    target,
    weight=None,
    ignore_index=-100,
    lse_square_scale=0.0,
    label_smoothing=0.0,
    reduction="mean",
    softcap=None,
    return_z_loss=False,
):
    """Cross entropy of ``[BT, V]`` logits; returns ``(loss, z_loss)`` when ``return_z_loss`` else ``loss``."""
    loss, z_loss = LigerCrossEntropyFunction.apply(
        input, target, weight, ignore_index, lse_square_scale, label_smoothing, reduction, softcap, return_z_loss
    )
    if return_z_loss:
        return loss, z_loss
    return loss


def liger_rms_norm(X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
    """RMSNorm of ``X`` over its last dimension, scaled by ``offset + W`` (not scaled when ``W`` is None)."""
    return LigerRMSNormFunction.apply(X, W, eps, offset, casting_mode, in_place, row_mode)


def liger_swiglu(a, b, gate_multiplier=1.0, down_multiplier=1.0):
    """``silu(a * gate_multiplier) * b * down_multiplier``; backward overwrites ``a`` and ``b`` with their gradients."""
    return LigerSiLUMulFunction.apply(a, b, gate_multiplier, down_multiplier)
