"""xIELU (HF transformers' XIELUActivation, python path), fp32 parameters."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class XIELU(nn.Module):
    def __init__(self, alpha_p_init: float = 0.8, alpha_n_init: float = 0.8, beta: float = 0.5, eps: float = -1e-6):
        super().__init__()
        self.alpha_p = nn.Parameter(torch.log(torch.expm1(torch.tensor(alpha_p_init))).unsqueeze(0))
        self.alpha_n = nn.Parameter(torch.log(torch.expm1(torch.tensor(alpha_n_init - beta))).unsqueeze(0))
        self.register_buffer("beta", torch.tensor(beta))
        self.register_buffer("eps", torch.tensor(eps))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha_p = F.softplus(self.alpha_p)
        alpha_n = self.beta + F.softplus(self.alpha_n)
        return torch.where(
            x > 0,
            alpha_p * x * x + self.beta * x,
            (torch.expm1(torch.min(x, self.eps)) - x) * alpha_n + self.beta * x,
        )
