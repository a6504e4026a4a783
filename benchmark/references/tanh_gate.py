import torch


def tanh_gate(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.tanh(a) * b
