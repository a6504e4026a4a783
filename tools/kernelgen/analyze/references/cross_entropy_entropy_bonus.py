"""Cross entropy minus an entropy bonus (as in policy-gradient fine-tuning: the bonus keeps the policy from
collapsing): ``-log softmax(logits)[target] - entropy_weight * H(softmax(logits))``, averaged over the rows that
count."""

import torch


def cross_entropy_entropy_bonus(
    logits: torch.Tensor, target: torch.Tensor, entropy_weight: float = 0.01, ignore_index: int = -100
) -> torch.Tensor:
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    nll = -log_probs.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    kept = (target != ignore_index).float()
    return ((nll - entropy_weight * entropy) * kept).sum() / kept.sum().clamp(min=1)


KERNELGEN = {
    "entry": "cross_entropy_entropy_bonus",
    "module_kind": "loss",
    "description": "cross entropy - entropy_weight * entropy of the softmax, over the rows that count",
    "benchmark": {"fixed_config": {"BT": 8192, "vocab_size": 128256}},
}
