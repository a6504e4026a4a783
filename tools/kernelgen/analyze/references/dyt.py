"""Dynamic Tanh (DyT): a normalization-free replacement for LayerNorm, gamma * tanh(alpha * x) + beta, with the
constructor of Liger's ``LigerDyT``: ``beta=False`` drops the shift, ``init_alpha`` starts the scalar alpha."""

import torch
import torch.nn as nn


class DyT(nn.Module):
    def __init__(self, hidden_size: int, beta: bool = True, init_alpha: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), init_alpha))
        self.gamma = nn.Parameter(torch.ones(hidden_size))
        self.beta = nn.Parameter(torch.zeros(hidden_size)) if beta else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.gamma * torch.tanh(self.alpha * x)
        if self.beta is not None:
            y = y + self.beta
        return y


KERNELGEN = {
    "entry": "DyT",
    "function_class_name": "LigerDyTFunction",
    "module_class_name": "LigerDyT",
    "module_kind": "elementwise",
    "init_args": {"hidden_size": 8},
    "description": "gamma * tanh(alpha * x) + beta with a learnable scalar alpha, per-channel gamma and optional beta",
}
