"""Squared ReLU (Primer): relu(x) ** 2."""

import torch


def relu_squared(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) ** 2


KERNELGEN = {
    "entry": "relu_squared",
    "module_kind": "elementwise",
    "description": "relu(x) ** 2, the squared-ReLU activation",
}
