import torch
import torch.nn as nn
import torch.nn.functional as F


class WeightedTokenLoss(nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits, labels, token_weights):
        losses = F.cross_entropy(logits, labels, ignore_index=self.ignore_index, reduction="none")
        return (losses * token_weights).sum() / token_weights.sum()


def nll_masked(logits, target, loss_mask):
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return (nll * loss_mask).sum() / loss_mask.sum().clamp(min=1.0)


def smoothed_weighted(logits, target, w, smoothing: float = 0.1):
    per = F.cross_entropy(logits, target, reduction="none", label_smoothing=smoothing)
    return (per * w).mean()


def z_loss_masked(logits, target, keep):
    lse = torch.logsumexp(logits, dim=-1)
    ce = lse - logits.gather(-1, target[:, None]).squeeze(-1)
    per = ce + 1e-4 * lse**2
    return torch.where(keep, per, torch.zeros_like(per)).sum() / keep.sum()
