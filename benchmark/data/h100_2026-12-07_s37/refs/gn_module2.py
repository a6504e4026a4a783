import torch
import torch.nn as nn


class GroupNorm(nn.Module):
    """GroupNorm written out by hand, per-channel affine read as w[None, :, None] on [b, c, L]."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, l = x.shape
        xg = x.view(b, self.num_groups, -1)
        mean = xg.mean(-1, keepdim=True)
        var = ((xg - mean) ** 2).mean(-1, keepdim=True)
        xg = (xg - mean) * torch.rsqrt(var + self.eps)
        x = xg.view(b, c, l)
        return x * self.weight[None, :, None] + self.bias[None, :, None]
