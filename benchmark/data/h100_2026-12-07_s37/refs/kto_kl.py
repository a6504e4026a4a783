"""KTO (TRL KTOTrainer): the KL baseline from the mismatched completions, computed in-batch.

The batch holds B completions then B mismatched 'KL' completions (first half / second half). The KL estimate is the
mean of their policy-minus-reference log-ratios, clamped at zero and detached, as in TRL.
"""

import torch


def kto_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ref_logps: torch.Tensor,
    ref_kl_logps: torch.Tensor,
    desirable: torch.Tensor,
    beta: float = 0.1,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
) -> torch.Tensor:
    mask = labels != -100
    logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    seq = (logp * mask).sum(-1)
    policy_logps, policy_kl_logps = seq.chunk(2)
    kl = (policy_kl_logps - ref_kl_logps).mean().clamp(min=0).detach()
    logratios = policy_logps - ref_logps
    chosen = desirable_weight * (1 - torch.sigmoid(beta * (logratios - kl)))
    rejected = undesirable_weight * (1 - torch.sigmoid(beta * (kl - logratios)))
    return torch.where(desirable, chosen, rejected).mean()
