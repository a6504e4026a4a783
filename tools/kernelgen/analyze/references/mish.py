"""Mish activation: x * tanh(softplus(x))."""

import torch
import torch.nn.functional as F


def mish(x: torch.Tensor) -> torch.Tensor:
    return F.mish(x)


KERNELGEN = {"entry": "mish", "module_kind": "elementwise", "description": "x * tanh(softplus(x))"}
