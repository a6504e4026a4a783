"""LayerNorm over the hidden dimension: (x - mean) / sqrt(var + eps) * weight + bias."""

import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        centered = x - mean
        variance = (centered * centered).mean(-1, keepdim=True)
        return centered * torch.rsqrt(variance + self.eps) * self.weight + self.bias


KERNELGEN = {
    "entry": "LayerNorm",
    "module_class_name": "LigerLayerNorm",
    "module_kind": "norm",
    "init_args": {"hidden_size": 8},
    "description": "(x - mean(x)) * rsqrt(var(x) + eps) * weight + bias over the last dimension",
}
