"""Hard tanh: x clamped to [min_val, max_val], with both bounds as hyper-parameters."""

import torch
import torch.nn.functional as F


def hardtanh(x: torch.Tensor, min_val: float = -1.0, max_val: float = 1.0) -> torch.Tensor:
    return F.hardtanh(x, min_val, max_val)


KERNELGEN = {"entry": "hardtanh", "module_kind": "elementwise", "description": "clamp(x, min_val, max_val)"}
