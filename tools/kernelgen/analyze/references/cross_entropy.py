"""Cross entropy of logits over the vocabulary and integer class targets, with label smoothing and a z-loss
(``lse_square_scale * logsumexp(logits) ** 2`` per row, as PaLM's auxiliary loss), averaged over the rows that
count."""

import torch
import torch.nn.functional as F


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    lse_square_scale: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    loss = F.cross_entropy(logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none")
    kept = target != ignore_index
    z_loss = lse_square_scale * torch.logsumexp(logits, dim=-1) ** 2
    loss = loss + torch.where(kept, z_loss, 0.0)
    if reduction == "mean":
        return loss.sum() / kept.sum()
    if reduction == "sum":
        return loss.sum()
    return loss


KERNELGEN = {
    "entry": "cross_entropy",
    "module_class_name": "LigerCrossEntropyLoss",
    "module_kind": "loss",
    "description": "F.cross_entropy(logits, target) with ignore_index, label smoothing, a z-loss and reduction",
    "benchmark": {"fixed_config": {"BT": 8192, "vocab_size": 128256}},
}
