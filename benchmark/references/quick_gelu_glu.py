import torch


def quick_gelu_glu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """GLU with the quick-GELU gate of CLIP: a * sigmoid(1.702 a) * b."""
    return a * torch.sigmoid(1.702 * a) * b
