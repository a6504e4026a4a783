"""Gated sine with three inputs: sin(x) * sigmoid(gate) + residual."""

import torch


def gated_sin(x: torch.Tensor, gate: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * torch.sigmoid(gate) + residual


KERNELGEN = {"entry": "gated_sin", "module_kind": "elementwise", "description": "sin(x) * sigmoid(gate) + residual"}
