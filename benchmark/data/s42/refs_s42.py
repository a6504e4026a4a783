"""Session 42's references, generated into .gpu-run by gen_refs.sh and tested there at model size."""

import torch
import torch.nn as nn


def atanh_gate(x, y):
    """atanh's log1p form on (-0.5, 0.5), gated."""
    return torch.atanh(torch.tanh(x) * 0.5) * y


def logit_eps(x):
    """logit with eps: the clamp's zero gradient outside [eps, 1 - eps] (inputs drawn over the real line)."""
    return torch.logit(torch.sigmoid(2 * x), eps=1e-3)


def acosh_act(x):
    """acosh(1 + x^2): exact near 0, where eager rounds 1 + x^2 first."""
    return torch.acosh(1.0 + x * x)


def truncated_gate(x, y):
    """Casts to integers truncate; a comparison cast to half is exact."""
    return x.to(torch.int32) * y + (x > 0).half() * y


class AtanhRMSNorm(nn.Module):
    """A row kernel through atanh of the normalized row (clamped inside (-1, 1))."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return torch.atanh(0.25 * normed.clamp(-3.0, 3.0)) * self.weight
