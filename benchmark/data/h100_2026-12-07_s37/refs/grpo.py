import torch


def grpo_token_loss(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> torch.Tensor:
    logps = torch.log_softmax(logits.float(), dim=-1)
    logps = torch.gather(logps, dim=-1, index=input_ids.unsqueeze(-1)).squeeze(-1)
    ratio = torch.exp(logps - old_logps)
    adv = advantages[:, None]
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    per_token = -torch.min(unclipped, clipped)
    per_seq = (per_token * completion_mask).sum(dim=1) / completion_mask.sum(dim=1).clamp(min=1.0)
    return per_seq.mean()
