import torch
import torch.nn as nn
import torch.nn.functional as F


def token_weighted_nll(logits, target, token_weight):
    logp = torch.log_softmax(logits, dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return -(logp * token_weight).mean()


def grpo_token_loss(logits, target, old_logp, advantages, epsilon: float = 0.2):
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
    return -torch.min(ratio * advantages, clipped * advantages).mean()


class KLPenalizedNLL(nn.Module):
    # NLL plus the k3 estimate of the per-token KL to a reference model, masked mean over the tokens
    def __init__(self, beta: float = 0.04):
        super().__init__()
        self.beta = beta

    def forward(self, logits, labels, ref_logp, token_mask):
        logp = F.log_softmax(logits, dim=-1).gather(1, labels[:, None])[:, 0]
        kl = torch.exp(ref_logp - logp) - (ref_logp - logp) - 1
        return ((self.beta * kl - logp) * token_mask).sum() / token_mask.sum()


def weighted_soft_ce(logits, soft, w):
    # soft is a distribution over each row: per element, as the reference runs with it
    return -(F.log_softmax(logits, -1) * soft).sum(-1).mul(w).mean()


def mean_soft_ce(logits, soft):
    return -(F.log_softmax(logits, -1) * soft).mean()


def hinted_weight(logits, target, w):
    return -(F.log_softmax(logits, -1).gather(-1, target[:, None]).squeeze(-1) * w).sum()


def row_weight_by_hand(logits, w):
    # w is [rows]: made [rows, 1] to scale every class of its row
    return (logits.logsumexp(-1, keepdim=True) * w.unsqueeze(-1)).mean()


def trl_grpo(logits, input_ids, old_per_token_logps, advantages, completion_mask, epsilon: float = 0.2):
    # TRL's layout: logits [B, T, V], the rest [B, T]; the gather names dim 2
    per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=input_ids.unsqueeze(-1)).squeeze(-1)
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    return (per_token_loss * completion_mask).sum() / completion_mask.sum()
