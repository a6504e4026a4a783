"""Gated leaky ReLU: leaky_relu(a, negative_slope) * b, with the slope as a runtime hyper-parameter."""

import torch
import torch.nn.functional as F


def leaky_relu_mul(a: torch.Tensor, b: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    return F.leaky_relu(a, negative_slope) * b


KERNELGEN = {
    "entry": "leaky_relu_mul",
    "module_kind": "elementwise",
    "description": "leaky_relu(a, negative_slope) * b",
}
