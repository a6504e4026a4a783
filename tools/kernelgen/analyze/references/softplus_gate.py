"""Softplus gate: softplus(a) * b, with the softplus beta and linear-region threshold as hyper-parameters."""

import torch
import torch.nn.functional as F


def softplus_gate(a: torch.Tensor, b: torch.Tensor, beta: float = 1.0, threshold: float = 20.0) -> torch.Tensor:
    return F.softplus(a, beta=beta, threshold=threshold) * b


KERNELGEN = {
    "entry": "softplus_gate",
    "module_kind": "elementwise",
    "description": "softplus(a, beta, threshold) * b",
}
