"""Cross entropy of logits over the vocabulary and integer class targets, averaged over the non-ignored rows."""

import torch
import torch.nn.functional as F


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    return F.cross_entropy(
        logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )


KERNELGEN = {
    "entry": "cross_entropy",
    "module_class_name": "LigerCrossEntropyLoss",
    "module_kind": "loss",
    "description": "F.cross_entropy(logits, target) with ignore_index, label smoothing and reduction",
    "benchmark": {"fixed_config": {"BT": 4096, "vocab_size": 32000}},
}
