"""CISPO (MiniMax-M1): clipped importance weight, detached, times the log-probability; token mean."""

import torch


def cispo_loss(logits, labels, old_logps, advantages, *, eps_high: float = 0.28):
    mask = labels != -100
    logps = torch.log_softmax(logits, dim=-1)
    logps = logps.gather(-1, torch.where(mask, labels, 0)[..., None])[..., 0]
    ratio = torch.exp(logps - old_logps)
    weight = torch.clamp(ratio, max=1 + eps_high).detach()
    per_token = -weight * advantages[:, None] * logps
    return (per_token * mask).sum() / mask.sum()
