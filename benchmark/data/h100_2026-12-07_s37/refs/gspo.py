"""GSPO (Zheng et al.): sequence-level importance ratio exp(mean_t log r_t), clipped, mean over sequences."""

import torch
import torch.nn as nn


class GSPOLoss(nn.Module):
    def __init__(self, clip_low: float = 3e-4, clip_high: float = 4e-4):
        super().__init__()
        self.clip_low = clip_low
        self.clip_high = clip_high

    def forward(self, logits, labels, old_logps, advantages):
        mask = (labels != -100).float()
        logp = logits.log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        seq_log_ratio = ((logp - old_logps) * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        ratio = torch.exp(seq_log_ratio)
        clipped = ratio.clamp(1 - self.clip_low, 1 + self.clip_high)
        return -torch.min(ratio * advantages, clipped * advantages).mean()
