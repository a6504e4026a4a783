"""Clamped gate: clamp(a, min=-limit, max=limit) * b, bounding the gate before it scales b."""

import torch


def clamp_mul(a: torch.Tensor, b: torch.Tensor, limit: float = 7.0) -> torch.Tensor:
    return torch.clamp(a, min=-limit, max=limit) * b


KERNELGEN = {"entry": "clamp_mul", "module_kind": "elementwise", "description": "clamp(a, -limit, limit) * b"}
