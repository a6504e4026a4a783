"""Generalised Jensen-Shannon divergence between two rows of log-probabilities: with ``m = beta * p + (1 - beta) *
q``, ``beta * KL(p || m) + (1 - beta) * KL(q || m)`` (``input``: the student's log q, ``target``: the teacher's
log p), summed over classes and averaged over rows."""

import torch


def jsd(input: torch.Tensor, target: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    q, p = input.exp(), target.exp()
    log_m = torch.log(beta * p + (1 - beta) * q)
    per_row = beta * (p * (target - log_m)).sum(-1) + (1 - beta) * (q * (input - log_m)).sum(-1)
    return per_row.sum() / input.shape[0]


KERNELGEN = {
    "entry": "jsd",
    "module_class_name": "LigerJSD",
    "module_kind": "loss",
    "domains": {"input": "log_probabilities", "target": "log_probabilities"},
    "description": "beta KL(p || m) + (1 - beta) KL(q || m), m = beta p + (1 - beta) q, from log-probabilities",
    "benchmark": {"fixed_config": {"BT": 8192, "vocab_size": 128256}},
}
