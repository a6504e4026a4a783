"""RMSNorm as Llama computes it: the statistics in fp32, the normalised row rounded back to the input's dtype
before the per-channel weight scales it."""

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        input_dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(input_dtype)


KERNELGEN = {
    "entry": "RMSNorm",
    "module_class_name": "LigerRMSNorm",
    "module_kind": "norm",
    "init_args": {"hidden_size": 8},
    "description": "weight * (x * rsqrt(mean(x ** 2, -1) + eps)), Llama's casting",
}
