"""KL divergence KL(target || input) between rows of distributions, as ``F.kl_div``: ``input`` holds
log-probabilities (a student's log-softmax), ``target`` probabilities (a teacher's softmax)."""

import torch
import torch.nn.functional as F


def kl_div(input: torch.Tensor, target: torch.Tensor, reduction: str = "batchmean") -> torch.Tensor:
    return F.kl_div(input, target, reduction=reduction, log_target=False)


KERNELGEN = {
    "entry": "kl_div",
    "module_class_name": "LigerKLDIVLoss",
    "module_kind": "loss",
    "domains": {"input": "log_probabilities", "target": "probabilities"},
    "description": "sum(target * (log(target) - input)) per row, F.kl_div's reductions",
    "benchmark": {"fixed_config": {"BT": 8192, "vocab_size": 128256}},
}
