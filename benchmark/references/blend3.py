import torch


def blend3(g: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A gated blend of two streams: s * x + (1 - s) * y with s = sigmoid(g)."""
    s = torch.sigmoid(g)
    return s * x + (1 - s) * y
