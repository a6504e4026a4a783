"""A residual add fused with the RMSNorm after it: returns the normalised sum and the sum itself (the next
residual), and differentiates both inputs."""

import torch
import torch.nn as nn


class FusedAddRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        hidden = x + residual
        variance = hidden.pow(2).mean(-1, keepdim=True)
        normed = hidden * torch.rsqrt(variance + self.eps) * self.weight
        return normed, hidden


KERNELGEN = {
    "entry": "FusedAddRMSNorm",
    "module_class_name": "LigerFusedAddRMSNorm",
    "module_kind": "norm",
    "init_args": {"hidden_size": 8},
    "description": "(x + residual) * rsqrt(mean((x + residual) ** 2, -1) + eps) * weight, and x + residual",
}
