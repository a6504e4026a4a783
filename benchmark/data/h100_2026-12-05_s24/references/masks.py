import torch
import torch.nn.functional as F


def masked_ce(logits, target, mask):
    # mask: [N] bool, True where the token counts
    per_row = F.cross_entropy(logits, target, reduction="none")
    return torch.where(mask, per_row, 0.0).sum() / mask.sum()


def masked_ce_float(logits, target, mask):
    per_row = F.cross_entropy(logits, target, reduction="none")
    return (per_row * mask).sum() / mask.sum().clamp(min=1)


def masked_ce_not(logits, target, pad):
    per_row = F.cross_entropy(logits, target, reduction="none")
    keep = ~pad
    return (per_row * keep).sum() / keep.sum()
