import torch.nn.functional as F


def token_weighted_ce(logits, target, weight):
    per_row = F.cross_entropy(logits, target, reduction="none")
    return (per_row * weight).sum() / weight.sum()
