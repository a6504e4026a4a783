"""Session 38's losses with a second output: OLMo's separate z-loss (a one-kernel loss: a gradient reaching z_loss is
refused) and a DPO that also returns its margin (two stages: both outputs differentiated)."""

import torch
import torch.nn.functional as F


def ce_and_z(logits, labels, ignore_index: int = -100, z_loss_multiplier: float = 1e-4):
    loss = F.cross_entropy(logits, labels, ignore_index=ignore_index)
    valid = labels != ignore_index
    z_loss = z_loss_multiplier * (logits.logsumexp(-1).pow(2) * valid).sum() / valid.sum()
    return loss, z_loss


def dpo_and_margin(logits, labels, beta: float = 0.1):
    logp = torch.gather(F.log_softmax(logits, -1), 2, labels.unsqueeze(-1)).squeeze(-1).sum(-1)
    chosen, rejected = logp.chunk(2)
    margin = (chosen - rejected).mean()
    return -F.logsigmoid(beta * (chosen - rejected)).mean(), margin
