"""Snake activation (audio models): x + sin(alpha * x) ** 2 / alpha with a learnable per-channel alpha."""

import torch
import torch.nn as nn


class Snake(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.sin(self.alpha * x).pow(2) / self.alpha


KERNELGEN = {
    "entry": "Snake",
    "module_kind": "elementwise",
    "init_args": {"hidden_size": 8},
    "description": "x + sin(alpha * x) ** 2 / alpha with a per-channel alpha",
}
