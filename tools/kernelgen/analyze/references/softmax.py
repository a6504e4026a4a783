"""Softmax over the last dimension."""

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


KERNELGEN = {"entry": "softmax", "module_kind": "elementwise", "description": "exp(x - max(x)) / sum(exp(x - max(x)))"}
