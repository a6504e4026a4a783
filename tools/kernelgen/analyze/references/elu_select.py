"""Selections and kinks: where(x > y, maximum(x, 0.5 * y), minimum(-x, y)) * cos(x) + elu(y, alpha=0.7)."""

import torch
import torch.nn.functional as F


def elu_select(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    chosen = torch.where(x > y, torch.maximum(x, 0.5 * y), torch.minimum(-x, y))
    return chosen * torch.cos(x) + F.elu(y, alpha=0.7)


KERNELGEN = {
    "entry": "elu_select",
    "module_kind": "elementwise",
    "description": "where with a comparison, maximum, minimum, neg, cos and elu",
}
