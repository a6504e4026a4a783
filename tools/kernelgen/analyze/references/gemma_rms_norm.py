"""RMSNorm as Gemma computes it: everything in fp32, the weight stored as an offset from 1 (zeros at init), one
rounding back to the input's dtype at the end."""

import torch
import torch.nn as nn


class GemmaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(hidden_size))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


KERNELGEN = {
    "entry": "GemmaRMSNorm",
    "module_class_name": "LigerGemmaRMSNorm",
    "module_kind": "norm",
    "init_args": {"hidden_size": 8},
    "description": "x * rsqrt(mean(x ** 2, -1) + eps) * (1 + weight), in fp32",
}
