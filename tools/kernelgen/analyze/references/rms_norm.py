"""RMSNorm (Llama): x / sqrt(mean(x ** 2) + eps) over the hidden dimension, scaled per channel."""

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


KERNELGEN = {
    "entry": "RMSNorm",
    "module_class_name": "LigerRMSNorm",
    "module_kind": "norm",
    "init_args": {"hidden_size": 8},
    "description": "x * rsqrt(mean(x ** 2, -1) + eps) * weight",
}
