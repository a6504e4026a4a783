"""Log-softmax over the last dimension."""

import torch
import torch.nn.functional as F


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(x, dim=-1)


KERNELGEN = {"entry": "log_softmax", "module_kind": "elementwise", "description": "x - logsumexp(x, -1)"}
