"""Session 40's references for the GPU check of its template changes (gen_refs.sh generates them)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def focal_upcast(logits, target, gamma: float = 2.0):
    """A loss computed after an upcast: the kernel returns it in fp32, as the reference does."""
    logp = F.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return (-((1 - picked.exp()) ** gamma) * picked).mean()


def smoothed_weighted_ce(logits, target, weight, label_smoothing: float = 0.1):
    """Class weights with label smoothing: weight=None weighs every class 1."""
    return F.cross_entropy(logits, target, weight=weight, label_smoothing=label_smoothing)


class NormSiLU(nn.Module):
    """A held nn.LayerNorm: the module keeps norm.weight and norm.bias where the reference does."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.scale = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return F.silu(self.norm(x)) * self.scale


class HeldGroupNorm(nn.Module):
    """A held nn.GroupNorm: its groups and eps follow the constructor."""

    def __init__(self, num_channels, num_groups=4, eps=1e-5):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, num_channels, eps=eps)

    def forward(self, x):
        return self.norm(x)
