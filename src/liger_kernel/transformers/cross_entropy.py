"""``nn.Module`` front end of the fused cross entropy kernel."""

import torch
import torch.nn as nn

from liger_kernel.ops.cross_entropy import check_cross_entropy_args
from liger_kernel.transformers.functional import CrossEntropyOutput  # noqa: F401  (re-exported for callers)
from liger_kernel.transformers.functional import liger_cross_entropy


class LigerCrossEntropyLoss(nn.Module):
    """Drop-in for ``nn.CrossEntropyLoss`` on ``[BT, V]`` logits, plus z-loss, logit softcapping and metrics.

    ``lse_square_scale`` adds ``lse_square_scale * logsumexp(logits) ** 2`` per row to the loss; ``softcap``
    replaces the logits by ``softcap * tanh(logits / softcap)`` first. The forward returns the loss, in the
    logits' dtype, or a ``CrossEntropyOutput`` when any of ``return_z_loss`` (the z-loss term, for logging),
    ``return_token_accuracy`` (fraction of non-ignored rows whose argmax is the target) or
    ``return_predicted_tokens`` (each row's argmax, -1 for ignored rows) is set. When the logits require a
    gradient they are overwritten by it during the forward pass (the kernel reuses their memory), so do not read
    them afterwards.
    """

    def __init__(
        self,
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
        super().__init__()
        check_cross_entropy_args(reduction, label_smoothing, softcap)
        # A buffer, as in nn.CrossEntropyLoss, so .to(device) moves the class weights with the module.
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.softcap = softcap
        self.return_z_loss = return_z_loss
        self.return_token_accuracy = return_token_accuracy
        self.return_predicted_tokens = return_predicted_tokens

    def forward(self, _input: torch.Tensor, target: torch.Tensor):
        return liger_cross_entropy(
            _input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            lse_square_scale=self.lse_square_scale,
            softcap=self.softcap,
            return_z_loss=self.return_z_loss,
            return_token_accuracy=self.return_token_accuracy,
            return_predicted_tokens=self.return_predicted_tokens,
        )

    def extra_repr(self) -> str:
        return (
            f"ignore_index={self.ignore_index}, lse_square_scale={self.lse_square_scale}, "
            f"label_smoothing={self.label_smoothing}, reduction={self.reduction!r}, softcap={self.softcap}, "
            f"return_z_loss={self.return_z_loss}, return_token_accuracy={self.return_token_accuracy}, "
            f"return_predicted_tokens={self.return_predicted_tokens}"
        )
