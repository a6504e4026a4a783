import torch
import torch.nn.functional as F


def grpo_with_entropy(logits, input_ids, old_logps, advantages, mask, eps: float = 0.2, ent_coef: float = 0.001):
    logp_all = F.log_softmax(logits, dim=-1)
    logps = logp_all.gather(dim=-1, index=input_ids.unsqueeze(-1)).squeeze(-1)
    ratio = (logps - old_logps).exp()
    adv = advantages.unsqueeze(-1)
    surr = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    per_tok = -surr - ent_coef * entropy
    return ((per_tok * mask).sum(-1) / mask.sum(-1)).mean()
