"""Dynamic Tanh (DyT): a normalization-free replacement for LayerNorm, weight * tanh(alpha * x) + bias."""

import torch
import torch.nn as nn


class DyT(nn.Module):
    def __init__(self, hidden_size: int, init_alpha: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((), init_alpha))
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * torch.tanh(self.alpha * x) + self.bias


KERNELGEN = {
    "entry": "DyT",
    "function_class_name": "LigerDyTFunction",
    "module_class_name": "LigerDyT",
    "module_kind": "elementwise",
    "init_args": {"hidden_size": 8},
    "description": "weight * tanh(alpha * x) + bias with a learnable scalar alpha and per-channel weight and bias",
}
