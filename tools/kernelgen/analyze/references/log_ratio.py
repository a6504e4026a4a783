"""A positive-domain mix of roots, logs and exponentials: sqrt(x) * rsqrt(y) + log(x) - exp(-|y|) / y."""

import torch


def log_ratio(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(x) * torch.rsqrt(y) + torch.log(x) - torch.exp(-torch.abs(y)) / y


KERNELGEN = {
    "entry": "log_ratio",
    "module_kind": "elementwise",
    "description": "sqrt, rsqrt, log, exp, abs and division on positive inputs",
}
