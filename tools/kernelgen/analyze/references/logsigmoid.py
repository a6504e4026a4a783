"""Log-sigmoid: log(sigmoid(x)), computed without overflow for large |x|."""

import torch
import torch.nn.functional as F


def logsigmoid(x: torch.Tensor) -> torch.Tensor:
    return F.logsigmoid(x)


KERNELGEN = {"entry": "logsigmoid", "module_kind": "elementwise", "description": "log(sigmoid(x))"}
