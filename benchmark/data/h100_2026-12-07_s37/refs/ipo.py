"""IPO (Azar et al.), TRL `loss_type="ipo"` style: a squared hinge on the length-averaged log-ratio."""

import torch


def _sequence_logps(logits: torch.Tensor, labels: torch.Tensor, *, average: bool) -> torch.Tensor:
    """Sum (or mean) of the label's log-probability over unmasked tokens."""
    loss_mask = labels != -100
    labels = torch.where(loss_mask, labels, torch.zeros_like(labels))
    per_token = torch.gather(logits.float().log_softmax(dim=-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    summed = (per_token * loss_mask).sum(-1)
    if average:
        return summed / loss_mask.sum(-1)
    return summed


def ipo_loss(
    policy_logits: torch.Tensor,
    labels: torch.Tensor,
    reference_chosen_logps: torch.Tensor,
    reference_rejected_logps: torch.Tensor,
    beta: float = 0.1,
) -> torch.Tensor:
    logps = _sequence_logps(policy_logits, labels, average=True)
    n = policy_logits.shape[0] // 2
    pi_logratios = logps[:n] - logps[n:]
    ref_logratios = reference_chosen_logps - reference_rejected_logps
    logits = pi_logratios - ref_logratios
    losses = (logits - 1 / (2 * beta)) ** 2
    return losses.mean()
