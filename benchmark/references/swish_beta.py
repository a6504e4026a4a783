import torch
import torch.nn as nn


class SwishBeta(nn.Module):
    """Swish with a fixed beta: x * sigmoid(beta * x)."""

    def __init__(self, beta: float = 1.5):
        super().__init__()
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.beta * x)
